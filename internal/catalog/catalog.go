// Package catalog reads the image catalog, etc/images.hcl: the names
// users write in `image = "pytorch-2.3"`, each mapped to an image file or
// directory on the nodes (a SIF, an OCI layout or archive, a rootfs), as
// Backend.AI's multi-version images are. bsub and schedd use it to refuse
// unknown names; the nodelet to find the file.
//
//	image "pytorch-2.3" {
//	  source      = "/shared/images/pytorch-2.3.sif"
//	  description = "PyTorch 2.3, CUDA 12.1, Python 3.11"
//	}
//
// It imports no troupe package but internal/hclattr (which imports
// none).
package catalog

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/troupe-hpc/troupe/internal/hclattr"
)

// ErrUnknownImage: the catalog has no image of that name.
var ErrUnknownImage = errors.New("unknown image")

// Source is one catalog entry.
type Source struct {
	Name        string // the block's label
	Path        string // source: absolute path on the nodes
	Description string
}

// Catalog maps image names to sources. The zero value is empty.
type Catalog struct {
	File   string // where it was loaded from; "" for an empty catalog
	images map[string]Source
}

var (
	fileSchema  = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "image", LabelNames: []string{"name"}}}}
	imageSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true}, {Name: "description"},
	}}
)

// nameOK says whether name is an image name: a letter or digit, then
// letters, digits, '_', '.', ':' and '-'.
func nameOK(name string) bool {
	for i, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == ':' || c == '-'):
		default:
			return false
		}
	}
	return name != ""
}

// decode reads the image blocks of body, hclattr's way (as job and
// partitions files are read): literal values only, each problem at its
// file:line:col.
func decode(body hcl.Body) ([]Source, hcl.Diagnostics) {
	var d hclattr.Decoder
	c := d.Content(body, fileSchema)
	if c == nil {
		return nil, d.Diags
	}
	var out []Source
	for _, b := range c.Blocks {
		im := Source{Name: b.Labels[0]}
		ic := d.Content(b.Body, imageSchema)
		if ic == nil {
			continue
		}
		attrs := d.Attrs(ic.Attributes, "")
		before := len(d.Diags)
		if a, ok := attrs.String("source", &im.Path); a != nil && !ok && len(d.Diags) == before {
			d.Errorf(a.Expr.Range(), "Invalid source", "image %q: source is null; it must be the image's absolute path.", im.Name)
		}
		attrs.String("description", &im.Description)
		out = append(out, im)
	}
	return out, d.Diags
}

// Load reads a catalog file. Errors carry file:line:col.
func Load(path string) (*Catalog, error) {
	p := hclparse.NewParser()
	f, diags := p.ParseHCLFile(path)
	if diags.HasErrors() {
		return nil, diagErr(p, diags)
	}
	images, diags := decode(f.Body)
	if diags.HasErrors() {
		return nil, diagErr(p, diags)
	}
	c := &Catalog{File: path, images: map[string]Source{}}
	for _, im := range images {
		switch {
		case !nameOK(im.Name) || im.Name == "host":
			return nil, fmt.Errorf("%s: image %q: want letters, digits, '.', '_', '-', ':' (and not \"host\")", path, im.Name)
		case !filepath.IsAbs(im.Path):
			return nil, fmt.Errorf("%s: image %q: source %q must be an absolute path", path, im.Name, im.Path)
		}
		if _, dup := c.images[im.Name]; dup {
			return nil, fmt.Errorf("%s: image %q defined twice", path, im.Name)
		}
		im.Path = filepath.Clean(im.Path)
		c.images[im.Name] = im
	}
	return c, nil
}

func diagErr(p *hclparse.Parser, diags hcl.Diagnostics) error {
	var b strings.Builder
	w := hcl.NewDiagnosticTextWriter(&b, p.Files(), 0, false)
	_ = w.WriteDiagnostics(diags)
	return errors.New(strings.TrimSpace(b.String()))
}

// Names lists the image names, sorted.
func (c *Catalog) Names() []string {
	if c == nil {
		return nil
	}
	names := make([]string, 0, len(c.images))
	for n := range c.images {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Resolve returns the source of name. An unknown name is an error
// wrapping ErrUnknownImage that lists the known names.
func (c *Catalog) Resolve(name string) (Source, error) {
	if c != nil {
		if s, ok := c.images[name]; ok {
			return s, nil
		}
	}
	known := "the catalog is empty"
	if names := c.Names(); len(names) > 0 {
		known = "known images: " + strings.Join(names, ", ")
	}
	return Source{}, fmt.Errorf("image %q: %w (%s; or use \"host\" or an absolute path)", name, ErrUnknownImage, known)
}

// IsName reports whether image is a catalog name rather than "host" or a
// path: what Resolve must be asked about.
func IsName(image string) bool {
	return image != "" && image != "host" && !filepath.IsAbs(image)
}
