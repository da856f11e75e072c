package accounting

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A PostgreSQL server for the tests, started once from Debian's
// postgresql package (initdb, pg_ctl under /usr/lib/postgresql/*/bin)
// in a temporary directory, listening on a unix socket only; stopped by
// TestMain. PostgreSQL refuses to run as root: as root it runs as uid
// 65534 (nobody).
var pg struct {
	once sync.Once
	dir  string // data dir and socket dir
	user string
	err  error // why there is none (the tests skip with it)
	n    int
	mu   sync.Mutex
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pg.dir != "" {
		pgCmd(pgBin("pg_ctl"), "-D", pg.dir, "-m", "immediate", "stop").Run()
		os.RemoveAll(pg.dir)
	}
	os.Exit(code)
}

func pgBin(name string) string {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// pgCmd runs a PostgreSQL tool, as nobody when this is root.
func pgCmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	return cmd
}

func startPostgres() error {
	if pgBin("initdb") == "" || pgBin("pg_ctl") == "" {
		return fmt.Errorf("no PostgreSQL server: install Debian's postgresql package (contrib/dev/install-deps does)")
	}
	dir, err := os.MkdirTemp("", "troupe-pg")
	if err != nil {
		return err
	}
	pg.user = "nobody"
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 65534, 65534); err != nil {
			return err
		}
	} else if u, err := user.Current(); err == nil {
		pg.user = u.Username
	}
	if out, err := pgCmd(pgBin("initdb"), "-D", dir, "-U", pg.user, "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	pg.dir = dir
	opts := fmt.Sprintf("-c listen_addresses='' -c unix_socket_directories=%s -c fsync=on", dir)
	if out, err := pgCmd(pgBin("pg_ctl"), "-D", dir, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	return nil
}

// openPostgres returns a store in a fresh database of the test server,
// or skips loudly when there is no server to start.
func openPostgres(t testing.TB) *Store {
	t.Helper()
	pg.once.Do(func() { pg.err = startPostgres() })
	if pg.err != nil {
		t.Skipf("SKIP PostgreSQL: %v", pg.err)
	}
	pg.mu.Lock()
	pg.n++
	name := "acct" + strconv.Itoa(pg.n) + "_" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	pg.mu.Unlock()
	ctx := context.Background()
	admin, err := OpenPostgres(ctx, fmt.Sprintf("host=%s user=%s dbname=postgres", pg.dir, pg.user))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	s, err := OpenPostgres(ctx, fmt.Sprintf("host=%s user=%s dbname=%s", pg.dir, pg.user, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPostgresMigrateTwice: opening the same database again finds the
// schema current (the migration runs once).
func TestPostgresMigrateTwice(t *testing.T) {
	s := openPostgres(t)
	if err := s.migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&n); err != nil || n != len(migrations) {
		t.Fatalf("schema_version has %d rows, %v; want %d", n, err, len(migrations))
	}
}
