package houserules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's top directory, seen from this package.
const root = "../.."

// goFiles lists the repository's Go files (test files too when withTests),
// as slash-separated paths relative to root.
func goFiles(t *testing.T, withTests bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || (!withTests && strings.HasSuffix(p, "_test.go")) {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no Go files found under the repository's root")
	}
	return out
}

// River's tables are named, outside tests and migrations, by one file: the
// one that hands out River's row format to the rest.
func TestRiverTablesNamedInOneFile(t *testing.T) {
	const owner = "jobs/riverrow.go"
	table := regexp.MustCompile(`\briver_(job|queue|leader|migration|client|client_queue)\b`)
	sawOwner := false
	for _, f := range goFiles(t, false) {
		if strings.HasPrefix(f, "migrations/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if !table.Match(b) {
			continue
		}
		if f == owner {
			sawOwner = true
			continue
		}
		t.Errorf("%s names a River table (%s); ask %s for the statement or fragment instead", f, table.Find(b), owner)
	}
	if !sawOwner {
		t.Errorf("%s names no River table: this test's owner is out of date", owner)
	}
}

// No function of the core packages (tests aside) is longer than 80 lines:
// a longer one becomes named steps.
func TestCoreFunctionsAreShort(t *testing.T) {
	const maxLines = 80
	core := []string{"ingest/", "jobs/", "idem/", "admin/"}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range goFiles(t, false) {
		inCore := false
		for _, c := range core {
			inCore = inCore || strings.HasPrefix(f, c)
		}
		if !inCore {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(root, f), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			var body *ast.BlockStmt
			name := "a function literal"
			switch fn := n.(type) {
			case *ast.FuncDecl:
				body, name = fn.Body, fn.Name.Name
			case *ast.FuncLit:
				body = fn.Body
			}
			if body == nil {
				return true
			}
			checked++
			start, end := fset.Position(n.Pos()), fset.Position(body.Rbrace)
			if lines := end.Line - start.Line + 1; lines > maxLines {
				t.Errorf("%s:%d: %s is %d lines long (at most %d): split it into named steps", f, start.Line, name, lines, maxLines)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no function checked in the core packages")
	}
}

// Comments cite the repository's own documents, never files a reader of
// the repository does not have.
func TestCommentsCiteOnlyTheRepository(t *testing.T) {
	outside := regexp.MustCompile(`CONTRACT\.md|PROVIDERS\.md|STYLE\.md|\.\./shared/`)
	fset := token.NewFileSet()
	for _, f := range goFiles(t, true) {
		file, err := parser.ParseFile(fset, filepath.Join(root, f), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range file.Comments {
			if m := outside.FindString(g.Text()); m != "" {
				t.Errorf("%s:%d: a comment cites %s, which is not in the repository; cite docs/ instead", f, fset.Position(g.Pos()).Line, m)
			}
		}
	}
}

// The README stays a ten-minute read (at most 15 KB, not counting folded
// <details> blocks such as the provider table, which a reader opens to look
// one row up) and links every page of docs/.
func TestREADMELinksEveryDocsPage(t *testing.T) {
	const maxBytes = 15 * 1024
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(regexp.MustCompile(`(?s)<details>.*?</details>`).ReplaceAll(readme, nil)); n > maxBytes {
		t.Errorf("README.md is %d bytes outside <details> blocks (at most %d): move detail into docs/", n, maxBytes)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md page found")
	}
	for _, p := range pages {
		link := "(docs/" + filepath.Base(p) + ")"
		if !strings.Contains(string(readme), link) {
			t.Errorf("README.md does not link docs/%s: add it to \"Where to go next\"", filepath.Base(p))
		}
	}
}
