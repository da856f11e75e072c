package image

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"
)

// Size caps on the JSON documents of an image, read into memory whole.
const (
	maxIndex  = 4 << 20
	maxConfig = 16 << 20
)

// layerRef is one layer to unpack: where its blob is, and what it must
// hash to compressed (Digest, Size; zero for a docker archive, whose
// manifest names none) and uncompressed (DiffID, from the config).
type layerRef struct {
	name   string
	digest v1.Hash
	size   int64
	diffID v1.Hash
}

// ociImage is an image whose config was checked: the key its content
// is cached under, and its layers.
type ociImage struct {
	key    string
	dir    *os.File // where the layers are, opened with open
	open   OpenFunc
	layers []layerRef
}

// ociRootfs unpacks an OCI layout or a docker/OCI archive, cached by its
// config digest (see the package doc). An image not trusted (a user's)
// that finds its entry in the cache has its layers checked first.
//
// An archive is read whole at every start (see readOCI), so the key it
// gave is memoised by its fileID, as sifRootfs memoises SIFs: a start of
// an archive unchanged since it was last read and checked reads nothing.
func (s *Store) ociRootfs(ref string, kind Kind, open OpenFunc, trusted bool) (rootfs string, err error) {
	var archive *os.File
	var id fileID
	if kind == KindArchive {
		if archive, err = openFile(ref); err != nil {
			return "", fmt.Errorf("image %s: %w", ref, err)
		}
		defer archive.Close()
		if id, err = idOf(archive); err != nil {
			return "", fmt.Errorf("image %s: %w", ref, err)
		}
		if key := s.recall(s.archives, id); key != "" {
			rootfs := filepath.Join(s.dir, key, "rootfs")
			if _, err := os.Stat(rootfs); err == nil {
				return rootfs, nil
			}
		}
	}
	tmp, err := s.stage()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	img, err := readOCI(archive, ref, kind, open, tmp)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	defer img.dir.Close()
	if archive != nil {
		// Known good once committed or checked, below: err is the result.
		defer func() {
			if err == nil {
				s.remember(s.archives, archive, id, start, img.key)
			}
		}()
	}
	rootfs, hit, err := s.commit(img.key, tmp, func(rootfs string) error {
		root, err := os.OpenRoot(rootfs)
		if err != nil {
			return err
		}
		defer root.Close()
		for _, l := range img.layers {
			if err := readLayer(root, img.dir, img.open, l); err != nil {
				return fmt.Errorf("image %s: %w", ref, err)
			}
		}
		return nil
	})
	if err != nil || !hit || trusted {
		return rootfs, err
	}
	if err = s.checkLayers(img, kind == KindOCILayout); err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	return rootfs, nil
}

// checkLayers reads img's layers and checks them against their digests,
// unpacking nothing. memo: the blobs are the user's own files (a
// layout's), whose checks are memoised by fileID as sifRootfs memoises
// SIFs: at worst a memo credits the user with content he showed before.
func (s *Store) checkLayers(img *ociImage, memo bool) error {
	for _, l := range img.layers {
		f, err := img.open(img.dir, l.name)
		if err != nil {
			return fmt.Errorf("layer %s: %w", l.name, err)
		}
		id, err := idOf(f)
		want := l.digest.String() + " " + l.diffID.String()
		if err == nil && memo && s.recall(s.blobs, id) == want {
			f.Close()
			continue
		}
		start := time.Now()
		err = streamLayer(nil, f, l)
		if err == nil && memo {
			s.remember(s.blobs, f, id, start, want)
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// readOCI reads ref's manifest and config, checked. An archive is first
// unpacked whole into tmp/archive (read once: what is checked there is
// what is unpacked) and read from there with openStaged.
func readOCI(archive *os.File, ref string, kind Kind, open OpenFunc, tmp string) (*ociImage, error) {
	dirPath := ref
	if kind == KindArchive {
		dirPath, open = filepath.Join(tmp, "archive"), openStaged
		if err := copyArchive(archive, dirPath); err != nil {
			return nil, err
		}
	}
	dir, err := openDir(dirPath)
	if err != nil {
		return nil, err
	}
	var img *ociImage
	if kind == KindArchive && !exists(dir, layoutFileName) {
		if !exists(dir, "manifest.json") {
			err = errors.New("archive holds neither manifest.json (docker save) nor oci-layout (OCI archive)")
		} else {
			img, err = readDocker(dir, open)
		}
	} else {
		img, err = readLayout(dir, open)
	}
	if err != nil {
		dir.Close()
		return nil, err
	}
	img.dir, img.open = dir, open
	return img, nil
}

// copyArchive unpacks the archive f into dst, reading it once.
func copyArchive(f *os.File, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	r, done, err := decompress(bufio.NewReader(f))
	if err != nil {
		return err
	}
	defer done()
	if err := Untar(r, dst); err != nil {
		return fmt.Errorf("reading archive: %w", err)
	}
	return nil
}

func exists(dir *os.File, name string) bool {
	f, err := openStaged(dir, name)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// readLayout reads an OCI layout's index.json, the manifest it names
// (the first image; in a nested index, the first for linux) and the
// manifest's config, each blob checked against its digest.
func readLayout(dir *os.File, open OpenFunc) (*ociImage, error) {
	b, err := readFile(dir, open, "index.json", maxIndex)
	if err != nil {
		return nil, err
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	desc, err := pickImage(dir, open, idx)
	if err != nil {
		return nil, err
	}
	mb, err := readBlob(dir, open, desc.Digest, desc.Size, maxIndex)
	if err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(mb))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", desc.Digest, err)
	}
	cb, err := readBlob(dir, open, m.Config.Digest, m.Config.Size, maxConfig)
	if err != nil {
		return nil, err
	}
	img, err := fromConfig(cb, m.Config.Digest)
	if err != nil {
		return nil, err
	}
	if len(m.Layers) != len(img.layers) {
		return nil, fmt.Errorf("manifest %s: %d layers, its config %d diff_ids", desc.Digest, len(m.Layers), len(img.layers))
	}
	for i, l := range m.Layers {
		name, err := blobName(l.Digest)
		if err != nil {
			return nil, err
		}
		img.layers[i].name, img.layers[i].digest, img.layers[i].size = name, l.Digest, l.Size
	}
	return img, nil
}

// pickImage: the first image manifest of idx, or of the first nested
// index that has one for linux.
func pickImage(dir *os.File, open OpenFunc, idx *v1.IndexManifest) (v1.Descriptor, error) {
	for _, d := range idx.Manifests {
		if d.MediaType.IsImage() {
			return d, nil
		}
		if !d.MediaType.IsIndex() {
			continue
		}
		b, err := readBlob(dir, open, d.Digest, d.Size, maxIndex)
		if err != nil {
			return v1.Descriptor{}, err
		}
		sub, err := v1.ParseIndexManifest(bytes.NewReader(b))
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("index %s: %w", d.Digest, err)
		}
		for _, sd := range sub.Manifests {
			if sd.MediaType.IsImage() && (sd.Platform == nil || sd.Platform.OS == "linux") {
				return sd, nil
			}
		}
	}
	return v1.Descriptor{}, errors.New("OCI layout holds no image")
}

// dockerManifest is an entry of a `docker save` archive's manifest.json.
type dockerManifest struct {
	Config string
	Layers []string
}

// readDocker reads a docker archive's manifest.json (its first image)
// and that image's config, whose own SHA-256 is the key.
func readDocker(dir *os.File, open OpenFunc) (*ociImage, error) {
	b, err := readFile(dir, open, "manifest.json", maxIndex)
	if err != nil {
		return nil, err
	}
	var ms []dockerManifest
	if err := json.Unmarshal(b, &ms); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	if len(ms) == 0 {
		return nil, errors.New("manifest.json lists no image")
	}
	m := ms[0]
	cb, err := readFile(dir, open, clean(m.Config), maxConfig)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(cb)
	img, err := fromConfig(cb, v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])})
	if err != nil {
		return nil, err
	}
	if len(m.Layers) != len(img.layers) {
		return nil, fmt.Errorf("manifest.json: %d layers, the config %d diff_ids", len(m.Layers), len(img.layers))
	}
	for i, l := range m.Layers {
		img.layers[i].name = clean(l)
	}
	return img, nil
}

func clean(name string) string { return filepath.Clean(strings.TrimLeft(name, "/")) }

// fromConfig: the image whose config cb was checked against digest:
// its key and its layers' diff_ids.
func fromConfig(cb []byte, digest v1.Hash) (*ociImage, error) {
	cfg, err := v1.ParseConfigFile(bytes.NewReader(cb))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", digest, err)
	}
	img := &ociImage{key: "img-" + digest.Algorithm + "-" + digest.Hex}
	for _, d := range cfg.RootFS.DiffIDs {
		if _, err := newHash(d.Algorithm); err != nil {
			return nil, fmt.Errorf("config %s: diff_id %s: %w", digest, d, err)
		}
		img.layers = append(img.layers, layerRef{diffID: d})
	}
	return img, nil
}

// newHash is the hash of a digest's algorithm.
func newHash(alg string) (hash.Hash, error) {
	switch alg {
	case "sha256":
		return sha256.New(), nil
	case "sha512":
		return sha512.New(), nil
	}
	return nil, fmt.Errorf("unsupported digest algorithm %q", alg)
}

// blobName is the layout path of the blob d, checked to be one.
func blobName(d v1.Hash) (string, error) {
	h, err := newHash(d.Algorithm)
	if err != nil {
		return "", err
	}
	if b, err := hex.DecodeString(d.Hex); err != nil || len(b) != h.Size() || strings.ToLower(d.Hex) != d.Hex {
		return "", fmt.Errorf("digest %s: malformed", d)
	}
	return "blobs/" + d.Algorithm + "/" + d.Hex, nil
}

// readFile reads name whole, at most max bytes.
func readFile(dir *os.File, open OpenFunc, name string, max int64) ([]byte, error) {
	f, err := open(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, max)
	}
	return b, nil
}

// readBlob reads the blob d whole and checks it against d and size:
// the bytes returned are the bytes hashed.
func readBlob(dir *os.File, open OpenFunc, d v1.Hash, size, max int64) ([]byte, error) {
	name, err := blobName(d)
	if err != nil {
		return nil, err
	}
	b, err := readFile(dir, open, name, max)
	if err != nil {
		return nil, err
	}
	h, _ := newHash(d.Algorithm)
	h.Write(b)
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Hex || int64(len(b)) != size {
		return nil, fmt.Errorf("blob %s (%d bytes, sha %s): %w", d, len(b), got, ErrDigest)
	}
	return b, nil
}

// readLayer unpacks the layer l into root (see streamLayer).
func readLayer(root *os.Root, dir *os.File, open OpenFunc, l layerRef) error {
	f, err := open(dir, l.name)
	if err != nil {
		return fmt.Errorf("layer %s: %w", l.name, err)
	}
	defer f.Close()
	return streamLayer(root, f, l)
}

// streamLayer unpacks the layer l from f into root (nil: nowhere),
// reading f once: the compressed bytes are hashed against l.digest and
// l.size (when known), the uncompressed tar against l.diffID, as they
// are unpacked. A mismatch is ErrDigest (what was unpacked stays in the
// staging directory, which is then removed).
func streamLayer(root *os.Root, f *os.File, l layerRef) error {
	var raw io.Reader = f
	var ch hash.Hash
	var err error
	if l.digest.Algorithm != "" {
		if ch, err = newHash(l.digest.Algorithm); err != nil {
			return err
		}
		raw = io.TeeReader(io.LimitReader(f, l.size+1), ch)
	}
	counted := &counter{r: raw}
	br := bufio.NewReader(counted)
	checkRaw := func() error {
		if ch == nil {
			return nil
		}
		if got := hex.EncodeToString(ch.Sum(nil)); got != l.digest.Hex || counted.n != l.size {
			return fmt.Errorf("layer %s (%d bytes, sha %s): %w", l.digest, counted.n, got, ErrDigest)
		}
		return nil
	}
	if err := unpackStream(root, br, l); err != nil {
		// A blob that is not what its digest names says so, rather
		// than how its bytes failed to decode.
		_, _ = io.Copy(io.Discard, counted)
		if derr := checkRaw(); derr != nil {
			return derr
		}
		return fmt.Errorf("layer %s: %w", l.name, err)
	}
	return checkRaw()
}

// unpackStream decompresses br, unpacks the tar into root (nil: nowhere)
// and checks it against l.diffID, reading both streams to their ends
// (tar padding, the compressor's trailer: the digests cover them too).
func unpackStream(root *os.Root, br *bufio.Reader, l layerRef) error {
	r, done, err := decompress(br)
	if err != nil {
		return err
	}
	defer done()
	uh, _ := newHash(l.diffID.Algorithm)
	tr := io.TeeReader(r, uh)
	if root != nil {
		if err := untar(tr, root, true); err != nil {
			return err
		}
	}
	if _, err := io.Copy(io.Discard, tr); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return err
	}
	if got := hex.EncodeToString(uh.Sum(nil)); got != l.diffID.Hex {
		return fmt.Errorf("uncompressed sha %s, its diff_id %s: %w", got, l.diffID, ErrDigest)
	}
	return nil
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// decompress: gzip or zstd by their magic numbers, else as it is; done
// releases the decompressor.
func decompress(br *bufio.Reader) (r io.Reader, done func(), err error) {
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		return z, func() { z.Close() }, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, err
		}
		return z, z.Close, nil
	}
	return br, func() {}, nil
}
