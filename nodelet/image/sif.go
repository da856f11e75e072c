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

	"github.com/sylabs/sif/v2/pkg/sif"
)

// sifMagic is at offset 32 of every SIF ("SIF_MAGIC").
var sifMagic = []byte("SIF_MAGIC")

func isSIF(path string) bool {
	f, err := os.Open(path)
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

// sifRootfs unpacks the primary system partition (squashfs) of a SIF
// with unsquashfs, cached by the SIF's ID and the partition's identity.
func (s *Store) sifRootfs(ref string) (string, error) {
	fi, err := sif.LoadContainerFromPath(ref, sif.OptLoadWithFlag(os.O_RDONLY))
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	defer func() { _ = fi.UnloadContainer() }()
	d, err := fi.GetDescriptor(sif.WithPartitionType(sif.PartPrimSys))
	if err != nil {
		return "", fmt.Errorf("image %s: no primary system partition: %w", ref, err)
	}
	fsType, _, _, err := d.PartitionMetadata()
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	if fsType != sif.FsSquash {
		return "", fmt.Errorf("image %s: partition is %s, only squashfs is supported", ref, fsType)
	}
	h := sha256.New()
	fmt.Fprintf(h, "sif\x00%s\x00%d\x00%d\x00%d\x00%d", fi.ID(), fi.ModifiedAt().Unix(), d.ID(), d.Offset(), d.Size())
	key := "sif-" + hex.EncodeToString(h.Sum(nil))
	return s.cached(key, func(rootfs string) error {
		sq := filepath.Join(filepath.Dir(rootfs), "partition.squashfs")
		f, err := os.Create(sq)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, d.GetReader())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("image %s: copying partition: %w", ref, err)
		}
		defer os.Remove(sq)
		// -f: rootfs exists already; -d: unpack there.
		out, err := exec.Command("unsquashfs", "-no-progress", "-f", "-d", rootfs, sq).CombinedOutput()
		if err != nil {
			return fmt.Errorf("image %s: unsquashfs (package squashfs-tools): %w: %s", ref, err, bytes.TrimSpace(out))
		}
		return nil
	})
}
