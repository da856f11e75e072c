// Package sshkey makes a session's SSH keypair and the ~/.ssh files
// every container of the session gets, laid out as Backend.AI does:
// id_cluster, id_cluster.pub, authorized_keys and a config that sends
// `ssh sub1` to port 2200 without a host-key prompt.
//
// Where the key comes from: every nodelet the session spans must hold
// the same keypair, and none of them may ask another. Each derives it:
// the ed25519 seed is HKDF-SHA256 of the cluster's session secret (a
// file every nodelet of the cluster is given, like a join token) with
// the session's UUID as salt. So the key is made when a node first
// prepares the session (when it is scheduled), identical on every node,
// never sent over the network, never stored by schedd (nor in its raft
// log), and gone with the session's files. Whoever reads the secret can
// derive every session's key: it is as sensitive as the nodes' root.
//
// It imports no troupe package.
package sshkey

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/crypto/ssh"
)

// SecretSize is the length of a session secret in bytes.
const SecretSize = 32

const info = "troupe session ssh key v1"

// Derive returns session's private key under secret.
func Derive(secret []byte, session string) (ed25519.PrivateKey, error) {
	if len(secret) < 16 {
		return nil, errors.New("session secret too short (want 32 random bytes)")
	}
	if session == "" {
		return nil, errors.New("no session id to derive a key for")
	}
	seed, err := hkdf.Key(sha256.New, secret, []byte(session), info, ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// LoadSecret reads the secret at path; when it does not exist and create
// is set, it writes a new random one (mode 0600) first.
func LoadSecret(path string, create bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		b = make([]byte, SecretSize)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return LoadSecret(path, false) // another process won the race
		}
		if err != nil {
			return nil, fmt.Errorf("session secret: %w", err)
		}
		_, werr := f.Write(b)
		if err := f.Close(); werr != nil || err != nil {
			return nil, fmt.Errorf("session secret: %w", errors.Join(werr, err))
		}
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session secret: %w", err)
	}
	if len(b) < 16 {
		return nil, fmt.Errorf("session secret %s: %d bytes, want %d", path, len(b), SecretSize)
	}
	return b, nil
}

// File is one file of ~/.ssh.
type File struct {
	Name string
	Data []byte
	Mode os.FileMode
}

// Files returns the ~/.ssh files for key: the private key in OpenSSH
// format, its public half, authorized_keys holding it, and config.
// comment names the key (e.g. "troupe-job-42").
func Files(key ed25519.PrivateKey, comment string, port int) ([]File, error) {
	blk, err := ssh.MarshalPrivateKey(key, comment)
	if err != nil {
		return nil, err
	}
	pub, err := ssh.NewPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	line := ssh.MarshalAuthorizedKey(pub)
	line = append(line[:len(line)-1], []byte(" "+comment+"\n")...)
	config := "Host main* sub*\n" +
		"\tPort " + strconv.Itoa(port) + "\n" +
		"\tIdentityFile ~/.ssh/id_cluster\n" +
		"\tStrictHostKeyChecking no\n" +
		"\tUserKnownHostsFile /dev/null\n" +
		"\tLogLevel ERROR\n"
	return []File{
		{"id_cluster", pem.EncodeToMemory(blk), 0o600},
		{"id_cluster.pub", line, 0o644},
		{"authorized_keys", line, 0o600},
		{"config", []byte(config), 0o600},
	}, nil
}
