package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/feval/feval/internal/faultproxy"
	"github.com/feval/feval/internal/testenv"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// cli runs feval in-process and returns its exit code, stdout and stderr.
func feval(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"feval"}, args...), strings.NewReader(""), &out, &errb)
	if strings.Contains(errb.String(), "goroutine ") || strings.Contains(errb.String(), "panic") {
		t.Fatalf("feval %v panicked:\n%s", args, errb.String())
	}
	return code, out.String(), errb.String()
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := feval(t, args...)
	if code != 0 {
		t.Fatalf("feval %v: exit %d: %s", args, code, errs)
	}
	return out
}

// wantExit runs feval and requires exit code want and a one-line error.
func wantExit(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, _, errs := feval(t, args...)
	if code != want {
		t.Fatalf("feval %v: exit %d, want %d: %s", args, code, want, errs)
	}
	if want != 4 && strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Fatalf("feval %v: error is not one line:\n%s", args, errs)
	}
	return errs
}

// reliabilityEnv isolates HOME and the store, makes a key, and packs a signed
// submission; it returns the submission's digest.
func reliabilityEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "home", "data"))
	t.Setenv("DOCKER_CONFIG", filepath.Join(dir, "home", "docker"))
	t.Setenv("FEVAL_STORE", filepath.Join(dir, "store"))
	t.Setenv("FEVAL_KEY", filepath.Join(dir, "keys", "me.key"))
	t.Setenv("FEVAL_PASSWORD", "reliability-password")
	tree := filepath.Join(dir, "tree")
	os.MkdirAll(tree, 0o755)
	os.WriteFile(filepath.Join(tree, "a.txt"), bytes.Repeat([]byte("submission content\n"), 4000), 0o644)
	mustCLI(t, "init")
	mustCLI(t, "key", "generate")
	return strings.TrimSpace(mustCLI(t, "pack", "--kind", "submission", "--tag", "sub", tree))
}

// TestRegistryFaultsExitCodes puts the fault proxy in front of the reference
// registry: a registry that keeps failing is exit 7 with one line, a stalled one
// ends at the deadline with exit 7, and a flipped bit is exit 4.
func TestRegistryFaultsExitCodes(t *testing.T) {
	sub := reliabilityEnv(t)
	reg := testenv.StartRegistry(t)
	mustCLI(t, "push", sub, reg.Addr+"/rel/a:v1")

	broken, err := faultproxy.Start(reg.Addr, faultproxy.Config{Faults: []faultproxy.Fault{faultproxy.Status500}, Percent: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer broken.Close()
	errs := wantExit(t, exitUnavailable, "push", "--timeout", "60s", sub, broken.Addr+"/rel/b:v1")
	if !strings.Contains(errs, "500") {
		t.Fatalf("error does not say what the registry answered: %s", errs)
	}

	stalled, err := faultproxy.Start(reg.Addr, faultproxy.Config{Faults: []faultproxy.Fault{faultproxy.Stall}, Percent: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	start := time.Now()
	wantExit(t, exitUnavailable, "pull", "--idle-timeout", "200ms", "--timeout", "2s", stalled.Addr+"/rel/a:v1")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a pull from a stalled registry took %v with --timeout 2s", d)
	}
	t.Setenv("FEVAL_TIMEOUT", "1s")
	t.Setenv("FEVAL_IDLE_TIMEOUT", "200ms")
	start = time.Now()
	wantExit(t, exitUnavailable, "pull", stalled.Addr+"/rel/a:v1")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("FEVAL_TIMEOUT=1s: the pull took %v", d)
	}
	t.Setenv("FEVAL_TIMEOUT", "")
	t.Setenv("FEVAL_IDLE_TIMEOUT", "")

	flipper, err := faultproxy.Start(reg.Addr, faultproxy.Config{Faults: []faultproxy.Fault{faultproxy.Flip}, Percent: 100,
		Match: func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/blobs/") }})
	if err != nil {
		t.Fatal(err)
	}
	defer flipper.Close()
	t.Setenv("FEVAL_STORE", filepath.Join(t.TempDir(), "other"))
	mustCLI(t, "init")
	wantExit(t, exitVerify, "pull", flipper.Addr+"/rel/a:v1")
}

// TestDamagedIndexRepair damages index.json and leaves a temporary file as a
// killed command would: the error names fsck, fsck lists both, and fsck
// --repair rebuilds the index from the blobs and removes the file.
func TestDamagedIndexRepair(t *testing.T) {
	sub := reliabilityEnv(t)
	store := os.Getenv("FEVAL_STORE")
	os.WriteFile(filepath.Join(store, "index.json"), []byte("{not json"), 0o644)
	tmp := filepath.Join(store, "blobs", "sha256", ".ingest-123456")
	os.WriteFile(tmp, bytes.Repeat([]byte{1}, 1000), 0o644)

	errs := wantExit(t, exitNotFound, "ls")
	if !strings.Contains(errs, "feval fsck") {
		t.Fatalf("damaged index error does not name fsck: %s", errs)
	}
	code, out, _ := feval(t, "fsck")
	if code != exitVerify || !strings.Contains(out, "damaged_index") || !strings.Contains(out, ".ingest-123456") {
		t.Fatalf("fsck of a damaged store: exit %d\n%s", code, out)
	}
	out = mustCLI(t, "fsck", "--repair")
	if !strings.Contains(out, "rebuilt index.json") || !strings.Contains(out, "removed blobs/sha256/.ingest-123456") {
		t.Fatalf("fsck --repair did not report its repairs:\n%s", out)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatal("the temporary file is still there")
	}
	mustCLI(t, "fsck")
	if out := mustCLI(t, "ls", "--all"); !strings.Contains(out, sub[7:19]) {
		t.Fatalf("the submission is not listed after repair:\n%s", out)
	}
	mustCLI(t, "verify", sub)
}

// TestHostileStoreCommands adds the hostile entries the issue found to a store:
// no command panics, fsck names every bad entry with exit 4, commands on the bad
// manifests exit 4, and commands about the sound artifact still work.
func TestHostileStoreCommands(t *testing.T) {
	sub := reliabilityEnv(t)
	store := os.Getenv("FEVAL_STORE")
	raw := func(s string) string {
		b := []byte(s)
		d := digest.FromBytes(b)
		os.WriteFile(filepath.Join(store, "blobs/sha256", d.Encoded()), b, 0o644)
		return d.String()
	}
	noConfig := raw(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","size":2},"layers":[]}`)
	badSubject := raw(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[],"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"not-a-digest","size":3}}`)
	var idx ocispec.Index
	b, _ := os.ReadFile(filepath.Join(store, "index.json"))
	json.Unmarshal(b, &idx)
	for _, d := range []string{noConfig, badSubject} {
		fi, _ := os.Stat(filepath.Join(store, "blobs/sha256", d[7:]))
		idx.Manifests = append(idx.Manifests, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.Digest(d), Size: fi.Size()})
	}
	idx.Manifests = append(idx.Manifests, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Size: 5})
	b, _ = json.Marshal(idx)
	os.WriteFile(filepath.Join(store, "index.json"), b, 0o644)

	code, out, _ := feval(t, "fsck")
	if code != exitVerify || !strings.Contains(out, "index.json manifests[") || !strings.Contains(out, noConfig) || !strings.Contains(out, badSubject) {
		t.Fatalf("fsck of a hostile store: exit %d\n%s", code, out)
	}
	for _, bad := range []string{noConfig, badSubject} {
		for _, cmd := range [][]string{{"verify", bad}, {"inspect", bad}} {
			if code, _, errs := feval(t, cmd...); code != exitVerify {
				t.Fatalf("feval %v: exit %d, want 4: %s", cmd, code, errs)
			}
		}
	}
	mustCLI(t, "ls")
	mustCLI(t, "verify", sub)
	mustCLI(t, "inspect", sub)
	reg := testenv.StartRegistry(t)
	mustCLI(t, "push", sub, reg.Addr+"/hostile/a:v1")
	if code, _, errs := feval(t, "push", noConfig, reg.Addr+"/hostile/b:v1"); code != exitVerify {
		t.Fatalf("push of a manifest without config: exit %d, want 4: %s", code, errs)
	}
}

// TestExitCodeClasses checks the exit code table for the inputs operators got
// wrong codes for: a missing path, special files in a tree, a damaged key file,
// and an artifact of the wrong kind.
func TestExitCodeClasses(t *testing.T) {
	reliabilityEnv(t)
	dir := t.TempDir()
	wantExit(t, exitNotFound, "pack", "--kind", "submission", filepath.Join(dir, "missing"))

	tree := filepath.Join(dir, "tree")
	os.MkdirAll(tree, 0o755)
	os.WriteFile(filepath.Join(tree, "a.txt"), []byte("a"), 0o644)
	link := filepath.Join(tree, "link")
	os.Symlink("/etc/passwd", link)
	if errs := wantExit(t, exitUsage, "pack", "--kind", "submission", tree); !strings.Contains(errs, "link") {
		t.Fatalf("the error does not name the link: %s", errs)
	}
	os.Remove(link)
	fifo := filepath.Join(tree, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := wantExit(t, exitUsage, "pack", "--kind", "submission", tree); !strings.Contains(errs, "fifo") {
		t.Fatalf("the error does not name the FIFO: %s", errs)
	}
	os.Remove(fifo)

	key, _ := os.ReadFile(os.Getenv("FEVAL_KEY"))
	truncated := filepath.Join(dir, "truncated.key")
	os.WriteFile(truncated, key[:len(key)/2], 0o600)
	t.Setenv("FEVAL_KEY", truncated)
	errs := wantExit(t, exitUsage, "pack", "--kind", "submission", tree)
	if strings.Contains(errs, "PASSWORD") || strings.Contains(errs, "password") || !strings.Contains(errs, "damaged or truncated") {
		t.Fatalf("a truncated key is reported as: %s", errs)
	}
	t.Setenv("FEVAL_KEY", filepath.Join(filepath.Dir(os.Getenv("FEVAL_STORE")), "keys", "me.key"))

	mustCLI(t, "pack", "--kind", "trace", "--tag", "tr", tree)
	errs = wantExit(t, exitUsage, "commit", "--round", "tr", "tr")
	if !strings.Contains(errs, "is a trace, not a round") {
		t.Fatalf("the wrong-kind error does not name both kinds: %s", errs)
	}
}
