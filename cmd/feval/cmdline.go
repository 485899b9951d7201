package main

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/feval/feval/cas"
	"github.com/urfave/cli/v2"
)

// The command-line conventions every feval command follows, applied to the
// whole command tree in one place rather than in each command:
//
//   - an unknown command or flag, a flag without its value, or a malformed value
//     is a usage error: exit 2, the error and a usage line on stderr, nothing on
//     stdout;
//   - flags may follow positional arguments ('feval inspect sub1 --json'); '--'
//     ends the flags, everything after it is an argument;
//   - 'feval help CMD...' is 'feval CMD... --help' and 'feval --version' is
//     'feval version';
//   - help shows a default only where the flag has one, and each command's
//     examples.

// completionFlag is the flag urfave/cli's shell completion appends to a
// command line to ask for candidates.
const completionFlag = "--generate-bash-completion"

// prepareArgs checks args (args[0] is the program name) against the command
// tree of app and returns them in the order urfave/cli parses: at each command
// its flags first, then "--" and the positional arguments. Unknown commands
// and flags, and value flags without a value, are usage errors. Completion
// requests pass unchanged.
func prepareArgs(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 || args[len(args)-1] == completionFlag {
		return args, nil
	}
	out := []string{args[0]}
	path := []string{app.Name}
	var cmd *cli.Command // nil: the application itself
	flags, subs := app.Flags, app.Commands
	rest := append([]string{}, args[1:]...)
	// Command groups: flags of the group, then the name of a subcommand.
	for cmd == nil || len(cmd.Subcommands) > 0 {
		for len(rest) > 0 && isFlag(rest[0]) && rest[0] != "--" {
			if cmd == nil && (rest[0] == "--version" || rest[0] == "-version") {
				rest[0] = "version"
				break
			}
			n, err := flagTokens(path, cmd, flags, rest)
			if err != nil {
				return nil, err
			}
			out, rest = append(out, rest[:n]...), rest[n:]
		}
		if len(rest) == 0 {
			return out, nil // urfave/cli shows the group's help
		}
		name := rest[0]
		if name == "--" {
			return nil, usagef("%s", unknownCommandText(path, cmd, subs, name))
		}
		if name == "help" && findCommand(subs, "help") == nil {
			// 'feval [GROUP] help CMD...' is 'feval [GROUP] CMD... --help'.
			again := append(append(append([]string{}, out...), rest[1:]...), "--help")
			return prepareArgs(app, again)
		}
		sub := findCommand(subs, name)
		if sub == nil {
			return nil, usagef("%s", unknownCommandText(path, cmd, subs, name))
		}
		out, rest = append(out, name), rest[1:]
		path = append(path, sub.Name)
		cmd, flags, subs = sub, sub.Flags, sub.Subcommands
	}
	// A command: its flags, wherever they are, then its arguments. Asked for
	// help, it gets nothing else (urfave/cli would read an argument as a topic).
	var positional []string
	base, help := len(out), false
	for len(rest) > 0 {
		t := rest[0]
		switch {
		case t == "--":
			positional, rest = append(positional, rest[1:]...), nil
		case isFlag(t):
			n, err := flagTokens(path, cmd, flags, rest)
			if err != nil {
				return nil, err
			}
			help = help || t == "--help" || t == "-help" || t == "-h" || t == "--h"
			out, rest = append(out, rest[:n]...), rest[n:]
		default:
			positional, rest = append(positional, t), rest[1:]
		}
	}
	if help {
		return append(out[:base], "--help"), nil
	}
	if len(positional) > 0 {
		out = append(append(out, "--"), positional...)
	}
	return out, nil
}

// isFlag reports whether a command-line token is a flag ("-" alone is an
// argument: standard input).
func isFlag(t string) bool { return len(t) > 1 && t[0] == '-' }

// flagTokens returns how many tokens at the start of rest form one flag of the
// command at path: 1, or 2 for a value flag given as '--name value'.
func flagTokens(path []string, cmd *cli.Command, flags []cli.Flag, rest []string) (int, error) {
	t := rest[0]
	name := strings.TrimPrefix(strings.TrimPrefix(t, "-"), "-")
	name, _, hasValue := strings.Cut(name, "=")
	f := findFlag(flags, name)
	if f == nil {
		msg := fmt.Sprintf("unknown flag %s for '%s'", t, strings.Join(path, " "))
		if hasValue {
			msg = fmt.Sprintf("unknown flag %s for '%s'", t[:strings.IndexByte(t, '=')], strings.Join(path, " "))
		}
		if s := closest(name, flagNames(flags)); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", dashed(s))
		}
		return 0, usagef("%s\n%s", msg, usageText(path, cmd))
	}
	if !takesValue(f) || hasValue {
		return 1, nil
	}
	if len(rest) < 2 {
		return 0, usagef("flag %s needs a value\n%s", t, usageText(path, cmd))
	}
	return 2, nil
}

// helpFlagNames are the names urfave/cli gives the help flag of every command.
var helpFlagNames = []string{"help", "h"}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	if name == "" {
		return nil
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	for _, n := range helpFlagNames {
		if n == name {
			return cli.HelpFlag
		}
	}
	return nil
}

func flagNames(flags []cli.Flag) []string {
	var out []string
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		out = append(out, f.Names()...)
	}
	return append(out, helpFlagNames[0])
}

func takesValue(f cli.Flag) bool {
	d, ok := f.(cli.DocGenerationFlag)
	return ok && d.TakesValue()
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func unknownCommandText(path []string, cmd *cli.Command, subs []*cli.Command, name string) string {
	msg := fmt.Sprintf("unknown command %q for '%s'", name, strings.Join(path, " "))
	var names []string
	for _, c := range subs {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	if s := closest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean '%s %s'?", strings.Join(path, " "), s)
	}
	return msg + "\n" + usageText(path, cmd)
}

// usageText is the short usage of the command at path (nil cmd: the
// application), as printed after a usage error.
func usageText(path []string, cmd *cli.Command) string {
	p := strings.Join(path, " ")
	if cmd == nil || len(cmd.Subcommands) > 0 {
		var subs []*cli.Command
		if cmd != nil {
			subs = cmd.Subcommands
		}
		var names []string
		for _, c := range subs {
			if !c.Hidden && c.Name != "help" {
				names = append(names, c.Name)
			}
		}
		s := fmt.Sprintf("usage: %s COMMAND [options] [ARGS]", p)
		if len(names) > 0 {
			s += "\ncommands: " + strings.Join(names, ", ")
		}
		return s + fmt.Sprintf("\nsee '%s --help'", p)
	}
	s := "usage: " + p + " [options]"
	if cmd.ArgsUsage != "" {
		s += " " + cmd.ArgsUsage
	}
	return s + fmt.Sprintf("\nsee '%s --help' for the options and examples", p)
}

// closest returns the candidate nearest to s, if it is near enough to be a
// likely typo (an edit distance of at most a third of its length, or a prefix).
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/3+1
	for _, c := range candidates {
		if len(s) >= 2 && strings.HasPrefix(c, s) {
			return c
		}
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// applyConventions walks the command tree once the commands exist: usage
// errors urfave/cli detects itself (a malformed number) become exit-2 usage
// errors with the command's usage line, and each command gets its examples.
func applyConventions(app *cli.App) {
	app.EnableBashCompletion = true
	// Only for help: prepareArgs turns --version into the version command.
	app.Flags = append(app.Flags, &cli.BoolFlag{Name: "version", Usage: "print the version (as 'feval version')"})
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return usagef("%v\n%s", err, usageText([]string{app.Name}, nil))
	}
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(append([]string{}, path...), c.Name)
			cmd := c
			// 'help' as a subcommand is handled by prepareArgs for every
			// command; urfave/cli would add it to leaf commands as well.
			c.HideHelpCommand = true
			c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
				return usagef("%v\n%s", err, usageText(p, cmd))
			}
			if c.Action != nil && len(c.Subcommands) == 0 {
				c.Action = withProgress(app, strings.Join(p[1:], " "), c.Action)
				c.Action = requireFlags(p, c)
			}
			if ex := commandExamples[strings.Join(p[1:], " ")]; ex != "" {
				if c.Description != "" {
					c.Description += "\n\n"
				}
				c.Description += "Examples:\n" + ex
			}
			walk(p, c.Subcommands)
		}
	}
	walk([]string{app.Name}, app.Commands)
}

// requireFlags takes over urfave/cli's check of flags marked Required, which
// prints the command's help on stdout: a missing one is a usage error like any
// other.
func requireFlags(path []string, c *cli.Command) cli.ActionFunc {
	var required []string
	for _, f := range c.Flags {
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			required = append(required, f.Names()[0])
			v := reflect.ValueOf(f)
			if v.Kind() == reflect.Pointer {
				if field := v.Elem().FieldByName("Required"); field.IsValid() && field.CanSet() && field.Kind() == reflect.Bool {
					field.SetBool(false)
				}
			}
		}
	}
	action := c.Action
	return func(ctx *cli.Context) error {
		for _, name := range required {
			if !ctx.IsSet(name) {
				return usagef("%s is required\n%s", dashed(name), usageText(path, c))
			}
		}
		return action(ctx)
	}
}

// withProgress runs a command's action with a progress bar in its context
// (cas.WithProgress), so that every library operation moving large data under
// it reports, without each command wiring it: none without a terminal on stderr
// or with --json or --quiet.
func withProgress(app *cli.App, label string, action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		quiet := c.Bool("json") || c.Bool("quiet")
		c.Context = cas.WithProgress(c.Context, newProgress(app.ErrWriter, quiet, label))
		c.Context = cas.WithSteps(c.Context, newSteps(app.ErrWriter, quiet, label))
		return action(c)
	}
}

// missingExamples lists the commands (by path) without an entry in
// commandExamples; a test keeps it empty.
func missingExamples(app *cli.App) []string {
	var out []string
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := strings.TrimSpace(path + " " + c.Name)
			if len(c.Subcommands) > 0 {
				walk(p, c.Subcommands)
				continue
			}
			if commandExamples[p] == "" {
				out = append(out, p)
			}
		}
	}
	walk("", app.Commands)
	sort.Strings(out)
	return out
}

// flagString renders one flag in help: names with a placeholder, usage, the
// default only when the flag has a real one (never for a boolean, a required
// flag, or one whose usage already says what the default is), and the
// environment variable that sets it.
func flagString(f cli.Flag) string {
	d, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return strings.Join(f.Names(), ", ")
	}
	usage := d.GetUsage()
	placeholder := ""
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			placeholder = usage[i+1 : i+1+j]
			usage = usage[:i] + placeholder + usage[i+2+j:]
		}
	}
	if d.TakesValue() && placeholder == "" {
		placeholder = "value"
	}
	var names []string
	for _, n := range f.Names() {
		s := dashed(n)
		if placeholder != "" {
			s += " " + placeholder
		}
		names = append(names, s)
	}
	if s, ok := f.(cli.DocGenerationSliceFlag); ok && s.IsSliceFlag() && !strings.Contains(usage, "repeatable") {
		usage += " (repeatable)"
	}
	def := strings.TrimSuffix(strings.TrimPrefix(d.GetDefaultText(), `"`), `"`)
	if d.TakesValue() && def != "" &&
		!strings.Contains(usage, "required") && !strings.Contains(usage, "default") {
		if _, isSlice := f.(cli.DocGenerationSliceFlag); !isSlice {
			usage += " (default: " + def + ")"
		}
	}
	if env := d.GetEnvVars(); len(env) > 0 {
		usage += " [$" + strings.Join(env, ", $") + "]"
	}
	return strings.Join(names, ", ") + "\t" + usage
}
