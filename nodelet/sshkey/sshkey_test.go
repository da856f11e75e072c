package sshkey

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestDerive(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, SecretSize)
	a1, err := Derive(secret, "session-a")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := Derive(secret, "session-a")
	b, _ := Derive(secret, "session-b")
	other, _ := Derive(bytes.Repeat([]byte{8}, SecretSize), "session-a")
	if !a1.Equal(a2) {
		t.Error("two nodes derive different keys for one session")
	}
	if a1.Equal(b) || a1.Equal(other) {
		t.Error("key does not depend on the session and the secret")
	}
	if _, err := Derive(secret[:8], "s"); err == nil {
		t.Error("short secret accepted")
	}
	if _, err := Derive(secret, ""); err == nil {
		t.Error("empty session accepted")
	}
}

func TestFilesAndSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	s1, err := LoadSecret(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := LoadSecret(path, true); err != nil || !bytes.Equal(s1, s2) {
		t.Fatalf("second load: %v, same %v", err, bytes.Equal(s1, s2))
	}
	key, _ := Derive(s1, "s")
	files, err := Files(key, "troupe-job-1", 2200)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]File{}
	for _, f := range files {
		byName[f.Name] = f
	}
	signer, err := ssh.ParsePrivateKey(byName["id_cluster"].Data)
	if err != nil || byName["id_cluster"].Mode != 0o600 {
		t.Fatalf("id_cluster: %v, mode %v", err, byName["id_cluster"].Mode)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(byName["authorized_keys"].Data)
	if err != nil || !bytes.Equal(pub.Marshal(), signer.PublicKey().Marshal()) {
		t.Errorf("authorized_keys does not hold id_cluster's public key: %v", err)
	}
	cfg := string(byName["config"].Data)
	for _, want := range []string{"Host main* sub*", "Port 2200", "StrictHostKeyChecking no", "UserKnownHostsFile /dev/null", "IdentityFile ~/.ssh/id_cluster"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
}
