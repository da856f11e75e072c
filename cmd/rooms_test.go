package cmd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxMethods is the most methods one type may declare: past it a type
// holds more than one role, and a reader must learn all of them to
// change any; its roles become types of their own.
const maxMethods = 40

// roomTrees are the trees whose types TestRoomSize holds to maxMethods,
// relative to the repository root.
var roomTrees = []string{"accounting", "cmd", "internal", "jobspec", "nodelet", "sched", "sim"}

// TestRoomSize: no type under roomTrees declares more than maxMethods
// methods (exported or not, tests' files left out).
func TestRoomSize(t *testing.T) {
	for _, tree := range roomTrees {
		counts, err := methodCounts(filepath.Join("..", tree))
		if err != nil {
			t.Fatalf("counting methods under %s: %v", tree, err)
		}
		if len(counts) == 0 {
			t.Fatalf("no methods under %s: the tree moved, and this test checks nothing there", tree)
		}
		for typ, n := range counts {
			if n > maxMethods {
				t.Errorf("%s declares %d methods, more than %d: split it by role", typ, n, maxMethods)
			}
		}
	}
}

// methodCounts counts the methods each type declares in the non-test Go
// files under root, by "dir.Type".
func methodCounts(root string) (map[string]int, error) {
	counts := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			if name := receiverType(fn.Recv.List[0].Type); name != "" {
				rel, _ := filepath.Rel("..", filepath.Dir(path))
				counts[filepath.ToSlash(rel)+"."+name]++
			}
		}
		return nil
	})
	return counts, err
}

// receiverType is the name of the type a receiver expression names
// (T, *T, T[P], *T[P]).
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
