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
// It imports no troupe package.
package catalog

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// ErrUnknownImage: the catalog has no image of that name.
var ErrUnknownImage = errors.New("unknown image")

// Source is one catalog entry.
type Source struct {
	Name        string `hcl:"name,label"`
	Path        string `hcl:"source"` // absolute path on the nodes
	Description string `hcl:"description,optional"`
}

// Catalog maps image names to sources. The zero value is empty.
type Catalog struct {
	File   string // where it was loaded from; "" for an empty catalog
	images map[string]Source
}

type file struct {
	Images []Source `hcl:"image,block"`
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// Load reads a catalog file. Errors carry file:line:col.
func Load(path string) (*Catalog, error) {
	p := hclparse.NewParser()
	f, diags := p.ParseHCLFile(path)
	if diags.HasErrors() {
		return nil, diagErr(p, diags)
	}
	var raw file
	if diags := gohcl.DecodeBody(f.Body, nil, &raw); diags.HasErrors() {
		return nil, diagErr(p, diags)
	}
	c := &Catalog{File: path, images: map[string]Source{}}
	for _, im := range raw.Images {
		switch {
		case !namePattern.MatchString(im.Name) || im.Name == "host":
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
