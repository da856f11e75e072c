package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// TokenPrefix starts every secret schedd issues (easy to spot in a leak).
const TokenPrefix = "trp_"

// NewSecret returns a fresh random bearer secret.
func NewSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return TokenPrefix + hex.EncodeToString(b)
}

// NewID returns a short random token id.
func NewID() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Hash is the SHA-256 (hex) schedd stores in place of a secret.
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Equal compares two secrets in constant time.
func Equal(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Bearer returns the request's bearer token ("" none).
func Bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// ReadSecretFile reads a token file: its first line, trimmed.
func ReadSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// JoinToken reads the cluster join token from path, making a new random
// one (mode 0600) when the file does not exist.
func JoinToken(path string) (string, error) {
	s, err := ReadSecretFile(path)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	s = NewSecret()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return s, f.Close()
}
