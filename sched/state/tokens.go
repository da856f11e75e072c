package state

import (
	"errors"
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// Server is a raft server's API address, so that followers can send
// clients (or their requests) to the leader.
type Server struct {
	ID  string `json:"id"`
	API string `json:"api"`
}

func putToken(txn *memdb.Txn, t *Token) error {
	if t == nil || t.ID == "" || len(t.Hash) != 64 {
		return errors.New("token without an id or a sha-256 hash")
	}
	c := *t
	return txn.Insert(tableTokens, &c)
}

func revokeToken(txn *memdb.Txn, id string) error {
	raw, err := txn.First(tableTokens, "id", id)
	if err != nil {
		return err
	}
	if raw == nil {
		return fmt.Errorf("token %q: %w", id, ErrNotFound)
	}
	return txn.Delete(tableTokens, raw)
}

func putServer(txn *memdb.Txn, s *Server) error {
	if s == nil || s.ID == "" {
		return errors.New("server without an id")
	}
	c := *s
	return txn.Insert(tableServers, &c)
}

// Tokens lists the token records by id.
func (v *credentialReads) Tokens() []*Token {
	it, err := v.txn.Get(tableTokens, "id")
	if err != nil {
		panic(err)
	}
	var out []*Token
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Token))
	}
	return out
}

// TokenByHash finds the token whose secret hashes to hash (hex).
func (v *credentialReads) TokenByHash(hash string) *Token {
	raw, err := v.txn.First(tableTokens, "hash", hash)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*Token)
}

// Token finds a token by id.
func (v *credentialReads) Token(id string) *Token {
	raw, err := v.txn.First(tableTokens, "id", id)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*Token)
}

// Servers lists the raft servers' API addresses.
func (v *credentialReads) Servers() []*Server {
	it, err := v.txn.Get(tableServers, "id")
	if err != nil {
		panic(err)
	}
	var out []*Server
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Server))
	}
	return out
}

// ServerAPI is the API address of raft server id ("" unknown).
func (v *credentialReads) ServerAPI(id string) string {
	raw, err := v.txn.First(tableServers, "id", id)
	if err != nil || raw == nil {
		return ""
	}
	return raw.(*Server).API
}
