package nodelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
)

// instanceFile holds the nodelet's instance id in its state directory.
const instanceFile = "instance"

// loadInstance returns this nodelet's instance id (api.NodeRegister.
// Instance), making it on first start. It lives in the state directory,
// so a restart keeps it (and re-registers at once), while a second
// nodelet started under the same name, with its own state directory, has
// another and is refused by schedd while the first is live.
func loadInstance(stateDir string) (string, error) {
	p := filepath.Join(stateDir, instanceFile)
	b, err := os.ReadFile(p)
	if err == nil {
		if id := strings.TrimSpace(string(b)); uuid.Validate(id) == nil {
			return id, nil
		}
		return "", fmt.Errorf("%s: not an instance id; remove it and the nodelet makes a new one", p)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	id := uuid.NewString()
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("saving the nodelet's instance id: %w", err)
	}
	return id, nil
}
