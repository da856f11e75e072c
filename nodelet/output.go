package nodelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openOutput opens the job's output file for appending, creating it
// owned by uid:gid. The nodelet runs as root in a directory the user
// controls, so it refuses to follow a symlink at the last component and
// to append to an existing file that is not the user's.
func openOutput(path string, uid, gid int) (*os.File, error) {
	const flags = os.O_WRONLY | os.O_APPEND | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	f, err := os.OpenFile(path, flags|os.O_CREATE|os.O_EXCL, 0o600) // the job's owner alone reads it
	if err == nil {
		if err := f.Chown(uid, gid); err != nil && os.Geteuid() == 0 {
			f.Close()
			return nil, fmt.Errorf("output %s: %w", path, err)
		}
		return f, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("output: %w", err)
	}
	if f, err = os.OpenFile(path, flags, 0); err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	if err := checkOwned(f, uid); err != nil {
		f.Close()
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	return f, nil
}

func checkOwned(f *os.File, uid int) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && os.Geteuid() == 0 && uid != 0 && int(st.Uid) != uid {
		return fmt.Errorf("exists and belongs to uid %d, not the job's uid %d", st.Uid, uid)
	}
	return nil
}
