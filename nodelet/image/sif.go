package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sylabs/sif/v2/pkg/sif"
)

// sifMagic is at offset 32 of every SIF ("SIF_MAGIC").
var sifMagic = []byte("SIF_MAGIC")

func isSIF(path string) bool {
	f, err := openFile(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 32+len(sifMagic))
	if _, err := io.ReadFull(f, b); err != nil {
		return false
	}
	return bytes.Equal(b[32:], sifMagic)
}

// fileID is what the kernel says of a file's identity and last change.
// Nobody can set a file's ctime: any change to its data or its
// attributes sets it to the present time.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

func idOf(f *os.File) (fileID, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileID{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fileID{uint64(st.Dev), st.Ino, st.Size, st.Mtim, st.Ctim}, nil
}

// memoMargin: a SIF whose ctime is this close to the moment its hashing
// began is not memoised (the file-system clock ticks coarsely, so a
// change made while it was read could keep the ctime it had).
var memoMargin = 2 * time.Second

// maxMemo bounds the memo; it starts over when full.
const maxMemo = 4096

// sifRootfs unpacks the primary system partition (squashfs) of a SIF
// with unsquashfs, cached by the SHA-256 of the partition's bytes.
//
// The partition is copied out of the SIF into the private staging
// directory while it is hashed, and unsquashfs reads that copy: the
// entry's name is the hash of exactly what it was unpacked from,
// whatever the SIF's owner writes to it meanwhile.
//
// Hashing a SIF on every start costs a read of it, so the hash is
// memoised by the file's device, inode, size, mtime and ctime. That is
// sound: the memo is taken only when those did not change while the file
// was read and its ctime is older than the read by memoMargin, so any
// later write gives the file another ctime, hence another fileID (an
// inode reused by a new file gets a new ctime too). And at worst, a memo
// maps that one file to content it held itself before: never to another
// file's, never to a catalog image's unless their content was the same.
func (s *Store) sifRootfs(ref string) (string, error) {
	f, err := openFile(ref)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	defer f.Close()
	id, err := idOf(f)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	if key := s.recall(s.sifs, id); key != "" {
		rootfs := filepath.Join(s.dir, key, "rootfs")
		if _, err := os.Stat(rootfs); err == nil {
			return rootfs, nil
		}
	}
	tmp, err := s.stage()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	sq := filepath.Join(tmp, "partition.squashfs")
	start := time.Now()
	key, err := copyPartition(f, sq)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	s.remember(s.sifs, f, id, start, key)
	rootfs, _, err := s.commit(key, tmp, func(rootfs string) error {
		// -f: rootfs exists already; -d: unpack there.
		out, err := exec.Command("unsquashfs", "-no-progress", "-f", "-d", rootfs, sq).CombinedOutput()
		if err != nil {
			return fmt.Errorf("image %s: unsquashfs (package squashfs-tools): %w: %s", ref, err, bytes.TrimSpace(out))
		}
		return nil
	})
	return rootfs, err
}

// recall is what memo says of the file id; "" when nothing.
func (s *Store) recall(memo map[fileID]string, id fileID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return memo[id]
}

// remember notes in memo that the file f, which was id when its reading
// began at start, gave v: only when it is id still, and its ctime is
// older than start by memoMargin (see sifRootfs).
func (s *Store) remember(memo map[fileID]string, f *os.File, id fileID, start time.Time, v string) {
	after, err := idOf(f)
	if err != nil || after != id || !time.Unix(id.ctime.Unix()).Add(memoMargin).Before(start) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(memo) >= maxMemo {
		clear(memo)
	}
	memo[id] = v
}

// copyPartition copies the SIF's primary squashfs partition to dst and
// returns the cache key of what it copied.
func copyPartition(f *os.File, dst string) (string, error) {
	fi, err := sif.LoadContainer(f, sif.OptLoadWithCloseOnUnload(false))
	if err != nil {
		return "", err
	}
	defer func() { _ = fi.UnloadContainer() }()
	d, err := fi.GetDescriptor(sif.WithPartitionType(sif.PartPrimSys))
	if err != nil {
		return "", fmt.Errorf("no primary system partition: %w", err)
	}
	fsType, _, _, err := d.PartitionMetadata()
	if err != nil {
		return "", err
	}
	if fsType != sif.FsSquash {
		return "", fmt.Errorf("partition is %s, only squashfs is supported", fsType)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), d.GetReader())
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("copying partition: %w", err)
	}
	if n != d.Size() {
		return "", fmt.Errorf("copying partition: %d bytes of %d", n, d.Size())
	}
	return "sif-sha256-" + hex.EncodeToString(h.Sum(nil)), nil
}
