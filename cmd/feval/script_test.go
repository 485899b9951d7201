package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/testenv"
	"github.com/feval/feval/sandbox"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	// The sandbox re-executes this binary as its init, under its own name.
	sandbox.InitIfChild()
	testscript.Main(m, map[string]func(){
		"feval": func() {
			sandbox.InitIfChild()
			os.Exit(runChecked(os.Args))
		},
	})
}

// TestScripts runs the CLI behaviour scripts in testdata/*.txtar. Each script gets
// its own store, key, and a fresh reference registry on 127.0.0.1 ($REGISTRY),
// with oras and cosign from bin/ on PATH.
func TestScripts(t *testing.T) {
	bin := testenv.BinDir()
	for _, tool := range []string{"registry", "oras", "cosign"} {
		testenv.Tool(t, tool)
	}
	sandboxInit := buildSandboxInit(t)
	// The torch runtime of the model package's tests, as an external
	// runtime of feval rollouts generate ($TORCH_RUNTIME).
	torchRuntime, err := filepath.Abs("../../model/testdata/qwen3_torch.py")
	if err != nil {
		t.Fatal(err)
	}
	// Every --json output of every script is checked against its schema.
	schemas, err := filepath.Abs(schemaDir)
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	run := flag.Lookup("test.run").Value.String()
	t.Cleanup(func() { reportSchemaChecks(t, logs, run == "" || run == "TestScripts") })
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			reg, err := testenv.Start(filepath.Join(bin, "registry"), filepath.Join(env.WorkDir, ".registry"))
			if err != nil {
				return err
			}
			env.Defer(reg.Stop)
			home := filepath.Join(env.WorkDir, ".home")
			env.Setenv("HOME", home)
			env.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
			env.Setenv("DOCKER_CONFIG", filepath.Join(home, "docker"))
			env.Setenv("REGISTRY", reg.Addr)
			env.Setenv("TORCH_RUNTIME", torchRuntime)
			env.Setenv("REGISTRY_ROOT", reg.Root)
			env.Setenv("FEVAL_STORE", filepath.Join(env.WorkDir, "store"))
			env.Setenv("FEVAL_KEY", filepath.Join(env.WorkDir, "keys", "me.key"))
			env.Setenv("FEVAL_PASSWORD", "script-password")
			env.Setenv(sandbox.InitEnv, sandboxInit)
			env.Setenv(schemaEnv, schemas+string(os.PathListSeparator)+logs)
			// bin/ goes last: "feval" must be this test binary, not a built copy.
			env.Setenv("PATH", env.Getenv("PATH")+string(os.PathListSeparator)+bin)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"corrupt":         cmdCorrupt,
			"status":          cmdStatus,
			"forge-reveal":    cmdForgeReveal,
			"envfile":         cmdEnvFile,
			"salt-pushed":     cmdSaltPushed,
			"genrollouts":     cmdGenRollouts,
			"genoptask":       cmdGenOptask,
			"gentinymodel":    cmdGenTinyModel,
			"setrevision":     cmdSetRevision,
			"swaptoken":       cmdSwapToken,
			"genscentask":     cmdGenScentask,
			"fixtureupstream": cmdFixtureUpstream,
			"sameboard":       cmdSameBoard,
			"samefrontier":    cmdSameFrontier,
			"webget":          cmdWebGet,
		},
	})
}

// cmdCorrupt flips one byte of an object of a local artifact or of its copy in
// the registry: corrupt [registry] manifest|record|payload|signature REF.
func cmdCorrupt(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("corrupt does not fail")
	}
	inRegistry := len(args) > 0 && args[0] == "registry"
	if inRegistry {
		args = args[1:]
	}
	if len(args) != 2 {
		ts.Fatalf("usage: corrupt [registry] manifest|record|payload|signature|signature-bundle REF")
	}
	ctx := context.Background()
	l, err := cas.OpenLayout(ts.Getenv("FEVAL_STORE"))
	ts.Check(err)
	desc, err := cas.ResolveRef(ctx, l, args[1])
	ts.Check(err)
	var target digest.Digest
	switch args[0] {
	case "manifest":
		target = desc.Digest
	case "record", "payload":
		art, err := bundle.Load(ctx, l, desc)
		ts.Check(err)
		target = art.Manifest.Layers[0].Digest
		if args[0] == "payload" {
			target = art.Payloads[0].Digest
		}
	case "signature", "signature-bundle":
		refs, err := l.Referrers(ctx, desc, bundle.MediaTypeSigstoreBundle)
		ts.Check(err)
		if len(refs) == 0 {
			ts.Fatalf("%s has no signature", args[1])
		}
		target = refs[0].Digest
		if args[0] == "signature-bundle" {
			node, _, err := cas.FetchNode(ctx, l, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: refs[0].Digest, Size: refs[0].Size})
			ts.Check(err)
			target = node.Children[1].Digest
		}
	default:
		ts.Fatalf("unknown object %q", args[0])
	}
	path := l.BlobPath(target)
	if inRegistry {
		path = filepath.Join(ts.Getenv("REGISTRY_ROOT"), "docker/registry/v2/blobs/sha256", target.Encoded()[:2], target.Encoded(), "data")
	}
	b, err := os.ReadFile(path)
	ts.Check(err)
	i := len(b) / 2
	if strings.HasPrefix(args[0], "signature-bundle") {
		// Inside the base64 signature, so the JSON stays well formed.
		if j := strings.Index(string(b), `"sig":"`); j >= 0 {
			i = j + 12
		}
	}
	b[i] ^= 0x01
	ts.Check(os.WriteFile(path, b, 0o644))
	fmt.Fprintf(ts.Stdout(), "%s\n", target)
}

// cmdStatus runs a command and requires its exit code: status N cmd args...
// Its stdout and stderr are then checked like those of exec.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status CODE command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// cmdEnvFile sets an environment variable to a file's trimmed content, or to the
// first N hex digits of the digest in it: envfile NAME FILE [N]. Scripts use it to
// carry a printed digest forward.
func cmdEnvFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: envfile NAME FILE [N]")
	}
	v := strings.TrimSpace(ts.ReadFile(args[1]))
	if len(args) == 3 {
		n, err := strconv.Atoi(args[2])
		ts.Check(err)
		v = strings.TrimPrefix(v, "sha256:")[:n]
	}
	ts.Setenv(args[0], v)
}
