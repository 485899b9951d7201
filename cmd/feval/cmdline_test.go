package main

import (
	"bytes"
	"errors"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestPrepareArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want string // "" with err
		err  string
	}{
		{"flags first already", "inspect --json sub1", "inspect --json -- sub1", ""},
		{"flag after argument", "inspect sub1 --json", "inspect --json -- sub1", ""},
		{"value flag after argument", "pack tree --kind submission", "pack --kind submission -- tree", ""},
		{"value flag with =", "pack tree --kind=submission", "pack --kind=submission -- tree", ""},
		{"value that looks like a flag", "pack --tag -x tree --kind submission", "pack --tag -x --kind submission -- tree", ""},
		{"single dash long flag", "pack -kind submission tree", "pack -kind submission -- tree", ""},
		{"short alias", "fsck -q", "fsck -q", ""},
		{"double dash ends flags", "pack --kind submission -- --json", "pack --kind submission -- --json", ""},
		{"arguments on both sides of --", "push a --json -- --b", "push --json -- a --b", ""},
		{"stdin dash is an argument", "record --kind note - --json", "record --kind note --json -- -", ""},
		{"subcommand", "key show --json", "key show --json", ""},
		{"subcommand flag after nothing", "task create dir --protocol rollouts", "task create --protocol rollouts -- dir", ""},
		{"sandbox run keeps its command", "sandbox run --wall-ms 5 -- /bin/sh -c 'x' --json", "sandbox run --wall-ms 5 -- /bin/sh -c 'x' --json", ""},
		{"help flag after argument", "inspect sub1 --help", "inspect --help", ""},
		{"help flag among others", "pack -h --kind x tree", "pack --help", ""},
		{"help command", "help key show", "key show --help", ""},
		{"help command alone", "help", "--help", ""},
		{"group help command", "key help show", "key show --help", ""},
		{"version flag", "--version", "version", ""},
		{"version flag with json", "--version --json", "version --json", ""},
		{"group alone", "key", "key", ""},
		{"program alone", "", "", ""},
		{"completion request untouched", "ls --j --generate-bash-completion", "ls --j --generate-bash-completion", ""},
		{"hidden flag accepted", "replay v --key k", "replay --key k -- v", ""},

		{"unknown command", "frob", "", `unknown command "frob" for 'feval'`},
		{"unknown subcommand", "key frob", "", `unknown command "frob" for 'feval key'`},
		{"unknown subcommand of help", "help frob", "", `unknown command "frob" for 'feval'`},
		{"typo suggests", "inspct x", "", `did you mean 'feval inspect'?`},
		{"unknown flag", "ls --frob", "", "unknown flag --frob for 'feval ls'"},
		{"unknown flag with value", "ls --frob=1", "", "unknown flag --frob for 'feval ls'"},
		{"unknown flag after argument", "inspect x --frob", "", "unknown flag --frob for 'feval inspect'"},
		{"flag typo suggests", "ls --jsn", "", "did you mean --json?"},
		{"unknown global flag", "--frob ls", "", "unknown flag --frob for 'feval'"},
		{"unknown flag of a group", "key --frob show", "", "unknown flag --frob for 'feval key'"},
		{"subcommand flag on the wrong level", "key --json show", "", "unknown flag --json for 'feval key'"},
		{"missing value", "ls --kind", "", "flag --kind needs a value"},
		{"triple dash", "ls ---json", "", "unknown flag ---json"},
		{"double dash instead of command", "-- ls", "", `unknown command "--" for 'feval'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := newApp(nil, io.Discard, io.Discard)
			in := []string{"feval"}
			if tc.in != "" {
				in = append(in, strings.Fields(tc.in)...)
			}
			orig := slices.Clone(in)
			got, err := prepareArgs(app, in)
			if !slices.Equal(in, orig) {
				t.Errorf("prepareArgs changed its input to %q", in)
			}
			if tc.err != "" {
				var ue *usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("prepareArgs(%q) = %q, %v; want a usage error containing %q", tc.in, got, err, tc.err)
				}
				if !strings.Contains(err.Error(), "\nusage: feval") {
					t.Errorf("error %q carries no usage line", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("prepareArgs(%q): %v", tc.in, err)
			}
			want := []string{"feval"}
			if tc.want != "" {
				want = append(want, strings.Fields(tc.want)...)
			}
			if !slices.Equal(got, want) {
				t.Errorf("prepareArgs(%q) = %q, want %q", tc.in, got, want)
			}
		})
	}
}

// TestUsageErrorsPrintNothingOnStdout runs every usage-error path through run:
// exit 2, the error and a usage line on stderr, nothing on stdout.
func TestUsageErrorsPrintNothingOnStdout(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("FEVAL_STORE", t.TempDir())
	t.Setenv("XDG_DATA_HOME", "")
	for _, line := range []string{
		"frob", "key frob", "task frob", "sandbox frob", "help frob", "ls --frob", "key show --frob", "--frob",
		"key --frob", "ls --kind", "sample -n abc x", "sandbox run --wall-ms nope -- /bin/true", "frob --json",
		"inspect x --frob", "completion tcsh", "ls extra", "key show extra", "task create",
	} {
		t.Run(line, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"feval"}, strings.Fields(line)...), strings.NewReader(""), &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, &stderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout is not empty:\n%s", &stdout)
			}
			if !strings.HasPrefix(stderr.String(), "feval: ") {
				t.Errorf("stderr does not start with the error:\n%s", &stderr)
			}
			if line != "completion tcsh" && !strings.Contains(stderr.String(), "usage: feval") {
				t.Errorf("stderr has no usage line:\n%s", &stderr)
			}
		})
	}
}

func TestEveryCommandHasExamples(t *testing.T) {
	app := newApp(nil, io.Discard, io.Discard)
	if missing := missingExamples(app); len(missing) > 0 {
		t.Errorf("commands without examples in commandExamples: %s", strings.Join(missing, ", "))
	}
	for path := range commandExamples {
		if findPath(app.Commands, strings.Fields(path)) == nil {
			t.Errorf("commandExamples has %q, which is no command", path)
		}
	}
}

func findPath(cmds []*cli.Command, path []string) *cli.Command {
	var c *cli.Command
	for _, name := range path {
		if c = findCommand(cmds, name); c == nil {
			return nil
		}
		cmds = c.Subcommands
	}
	return c
}

// TestHelpShowsNoContradictoryDefaults renders every command's help and
// checks that no flag shows two defaults, a default for a boolean, or a
// default next to "required".
func TestHelpShowsNoContradictoryDefaults(t *testing.T) {
	app := newApp(nil, io.Discard, io.Discard)
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(slices.Clone(path), c.Name)
			for _, f := range c.Flags {
				s := flagString(f)
				name := strings.Join(p, " ") + " --" + f.Names()[0]
				if strings.Count(s, "(default:") > 1 {
					t.Errorf("%s: two defaults: %s", name, s)
				}
				if strings.Contains(s, "required") && strings.Contains(s, "(default:") {
					t.Errorf("%s: required and a default: %s", name, s)
				}
				if _, ok := f.(*cli.BoolFlag); ok && strings.Contains(s, "(default: false)") {
					t.Errorf("%s: a boolean with a default: %s", name, s)
				}
			}
			walk(p, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
}

func TestFlagString(t *testing.T) {
	for _, tc := range []struct {
		flag cli.Flag
		want string
	}{
		{&cli.BoolFlag{Name: "json", Usage: "print JSON"}, "--json\tprint JSON"},
		{&cli.StringFlag{Name: "store", Usage: "store directory", Value: "/d", EnvVars: []string{"FEVAL_STORE"}}, "--store value\tstore directory (default: /d) [$FEVAL_STORE]"},
		{&cli.StringFlag{Name: "tag", Usage: "a `TAG` to add"}, "--tag TAG\ta TAG to add"},
		{&cli.Int64Flag{Name: "baseline", Usage: "the bar; required"}, "--baseline value\tthe bar; required"},
		{&cli.IntFlag{Name: "n", Usage: "size (default: the task's)"}, "-n value\tsize (default: the task's)"},
		{&cli.Int64Flag{Name: "wall-ms", Usage: "limit", Value: 60000}, "--wall-ms value\tlimit (default: 60000)"},
		{&cli.StringSliceFlag{Name: "pub", Aliases: []string{"trust"}, Usage: "key file"}, "--pub value, --trust value\tkey file (repeatable)"},
		{&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "quiet"}, "--quiet, -q\tquiet"},
	} {
		if got := flagString(tc.flag); got != tc.want {
			t.Errorf("flagString(%s) = %q, want %q", tc.flag.Names()[0], got, tc.want)
		}
	}
}

func TestBuildVersion(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/feval/feval", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "9a925df0123456789abcdef0123456789abcdef0"},
			{Key: "vcs.time", Value: "2026-11-30T12:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	got := buildVersion(bi)
	if got.Version != "v1.2.3" || got.Revision != "9a925df0123456789abcdef0123456789abcdef0" || !got.Modified ||
		got.Time != "2026-11-30T12:00:00Z" || got.Go != "go1.26.0" || got.Module != "github.com/feval/feval" {
		t.Errorf("buildVersion = %+v", got)
	}
	none := buildVersion(nil)
	if none.Version != "unknown" || none.Revision != "" || none.Go == "" {
		t.Errorf("buildVersion(nil) = %+v", none)
	}
}

func TestCloseEnough(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want string
	}{
		{"inspct", "inspect"}, {"lss", "ls"}, {"frob", ""}, {"jsn", "json"}, {"ver", "verify"}, {"x", ""},
	} {
		if got := closest(tc.s, []string{"inspect", "ls", "json", "verify", "version"}); got != tc.want {
			t.Errorf("closest(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestRequiredFlagIsAUsageError: a flag marked Required that is missing gives
// exit 2 with the usage on stderr, not urfave/cli's help on stdout.
func TestRequiredFlagIsAUsageError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	ran := false
	app := &cli.App{Name: "feval", Writer: &stdout, ErrWriter: &stderr, HideHelpCommand: true, ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{Name: "open", Flags: []cli.Flag{&cli.StringFlag{Name: "round", Required: true}},
			Action: func(*cli.Context) error { ran = true; return nil }}}}
	applyConventions(app)
	for _, tc := range []struct {
		args string
		code int
	}{{"open", exitUsage}, {"open --round r1", exitOK}} {
		stdout.Reset()
		stderr.Reset()
		ran = false
		args, err := prepareArgs(app, append([]string{"feval"}, strings.Fields(tc.args)...))
		if err == nil {
			err = app.Run(args)
		}
		if code := report(err, &stderr); code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr %q", tc.args, code, tc.code, &stderr)
		}
		if tc.code == exitUsage && (stdout.Len() != 0 || ran || !strings.Contains(stderr.String(), "--round is required\n  usage: feval open")) {
			t.Errorf("%s: stdout %q, ran %v, stderr %q", tc.args, &stdout, ran, &stderr)
		}
	}
}
