package sched

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// tcp serves srv as the TCP listener does (bearer tokens; no anonymous
// trust) and returns its URL.
func tcp(t *testing.T, srv *Server) string {
	hs := httptest.NewServer(srv.TCPHandler(false))
	t.Cleanup(hs.Close)
	return hs.URL
}

func userToken(t *testing.T, srv *Server, uid int, user string, admin bool) string {
	t.Helper()
	secret := auth.NewSecret()
	tok := api.Token{ID: auth.NewID(), Hash: auth.Hash(secret), UID: uid, GID: uid, User: user, Admin: admin}
	if _, err := srv.apply(context.Background(), state.Command{Act: state.PutToken{Token: tokenRow(&tok)}}); err != nil {
		t.Fatal(err)
	}
	return secret
}

func with(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.NewWith(url, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func status(err error) int {
	var ae *client.APIError
	if asAPI(err, &ae) {
		return ae.Status
	}
	return 0
}

func TestTokenRevokedRefused(t *testing.T) {
	srv, c := cluster(t)
	ctx := context.Background()
	u := tcp(t, srv)
	if _, err := with(t, u, "").Jobs(ctx, 0, 0); status(err) != 401 || !strings.Contains(err.Error(), "bearer token") {
		t.Fatalf("no token over TCP: %v, want 401", err)
	}
	if _, err := with(t, u, "trp_nonsense").Jobs(ctx, 0, 0); status(err) != 401 {
		t.Fatalf("unknown token: %v, want 401", err)
	}
	// The trusted handler (root's socket) issues a token for root.
	tok, err := c.CreateToken(ctx, api.TokenCreate{User: "root", Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Hash != "" {
		t.Fatalf("the answer leaks the hash: %+v", tok)
	}
	for _, st := range srv.Store().Snapshot().Tokens() {
		if st.Hash == tok.Secret || strings.Contains(st.Hash, tok.Secret) {
			t.Fatal("the secret is stored in clear")
		}
	}
	rc := with(t, u, tok.Secret)
	if _, err := rc.Jobs(ctx, 0, 0); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	if _, err := rc.Reconfig(ctx); status(err) == 403 || status(err) == 401 {
		t.Fatalf("admin token refused: %v", err)
	}
	if err := c.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	_, err = rc.Jobs(ctx, 0, 0)
	if status(err) != 401 || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked token: %v, want 401 in one line", err)
	}
}

func TestTokenUserCannotKillOthersJob(t *testing.T) {
	srv, c := cluster(t)
	register(t, c, "n1", 4)
	ctx := context.Background()
	u := tcp(t, srv)
	alice := with(t, u, userToken(t, srv, 1001, "alice", false))
	bob := with(t, u, userToken(t, srv, 1002, "bob", false))
	res, err := alice.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), UID: 0, User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := alice.Job(ctx, res.JobID, 0, 0)
	if err != nil || j.UID != 1001 || j.User != "alice" {
		t.Fatalf("alice's job: %+v %v; want uid 1001 whatever the body says", j, err)
	}
	if _, err := bob.Kill(ctx, res.JobID); status(err) != 403 {
		t.Fatalf("bob kills alice's job: %v, want 403", err)
	}
	if _, err := bob.Reconfig(ctx); status(err) != 403 {
		t.Fatalf("bob reconfigures: %v, want 403", err)
	}
	if _, err := bob.CreateToken(ctx, api.TokenCreate{User: "root", Admin: true}); status(err) != 403 {
		t.Fatalf("bob mints an admin token: %v, want 403", err)
	}
	if _, err := alice.Kill(ctx, res.JobID); err != nil {
		t.Fatalf("alice kills her own job: %v", err)
	}
}

func TestNodeJoinAndCredential(t *testing.T) {
	join := auth.NewSecret()
	srv, _ := clusterWith(t, Config{JoinToken: join})
	ctx := context.Background()
	u := tcp(t, srv)
	reg := func(name string) api.NodeRegister {
		return api.NodeRegister{Name: name, Addr: "127.0.0.1", Runtime: "process", Capacity: api.Resources{CPUMilli: 4000, Memory: 8 << 30}}
	}
	// Without the join token (no token, a wrong one, a user's): refused.
	for _, tok := range []string{"", "trp_wrong", userToken(t, srv, 1001, "alice", false)} {
		if _, err := with(t, u, tok).Register(ctx, reg("evil")); status(err) != 401 && status(err) != 403 {
			t.Fatalf("register with %q: %v, want 401/403", tok, err)
		}
	}
	if srv.Store().Snapshot().Node("evil") != nil {
		t.Fatal("a node registered without the join token")
	}
	// The join token registers and only that.
	jc := with(t, u, join)
	if _, err := jc.Jobs(ctx, 0, 0); status(err) != 403 {
		t.Fatalf("join token lists jobs: %v, want 403", err)
	}
	creds := map[string]string{}
	for _, n := range []string{"n1", "n2"} {
		node, err := jc.Register(ctx, reg(n))
		if err != nil || node.Credential == "" {
			t.Fatalf("register %s: %+v %v", n, node, err)
		}
		creds[n] = node.Credential
	}
	n1 := with(t, u, creds["n1"])
	if _, err := n1.Heartbeat(ctx, "n1", api.NodeHeartbeat{}); err != nil {
		t.Fatalf("n1's own heartbeat: %v", err)
	}
	if _, err := n1.Assignments(ctx, "n1", 0, 0); err != nil {
		t.Fatalf("n1's own assignments: %v", err)
	}
	// n1's credential cannot act for n2, nor as a user.
	if _, err := n1.Heartbeat(ctx, "n2", api.NodeHeartbeat{}); status(err) != 403 {
		t.Fatalf("n1 heartbeats for n2: %v, want 403", err)
	}
	if _, err := n1.Assignments(ctx, "n2", 0, 0); status(err) != 403 {
		t.Fatalf("n1 reads n2's assignments: %v, want 403", err)
	}
	if err := n1.Report(ctx, "n2", api.ContainerReport{}); status(err) != 403 {
		t.Fatalf("n1 reports for n2: %v, want 403", err)
	}
	if _, err := n1.Register(ctx, reg("n2")); status(err) != 403 {
		t.Fatalf("n1 re-registers as n2: %v, want 403", err)
	}
	if _, err := n1.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1))}); status(err) != 403 {
		t.Fatalf("n1 submits a job: %v, want 403", err)
	}
	if _, err := srv.Store().Snapshot().Token("node-n1"), error(nil); err != nil || srv.Store().Snapshot().Token("node-n1").Node != "n1" {
		t.Fatal("n1's credential is not recorded as bound to n1")
	}
}

func TestSubmitRequestIDIdempotent(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	req := api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), RequestID: "r-1"}
	a, err := c.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Submit(ctx, req)
	if err != nil || a.JobID != b.JobID {
		t.Fatalf("retried submission: %d then %d (%v); want the same job", a.JobID, b.JobID, err)
	}
}
