package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// outputOptions: --json and --quiet.
type outputOptions struct {
	JSON  bool
	Quiet bool
}

func (o *outputOptions) Flags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress output"},
	}
}

func (o *outputOptions) Parse(c *cli.Context) {
	o.JSON, o.Quiet = c.Bool("json"), c.Bool("quiet")
}

// storeOptions: the local store.
type storeOptions struct {
	Path string
}

func (o *storeOptions) Flags() []cli.Flag {
	return []cli.Flag{&cli.StringFlag{Name: "store", Usage: "local store directory", EnvVars: []string{envStore}, Value: defaultStore()}}
}

// Parse reads --store; an empty value (FEVAL_STORE set but empty) means the default.
func (o *storeOptions) Parse(c *cli.Context) { o.Path = cmp.Or(c.String("store"), defaultStore()) }

// Open opens the existing local store.
func (o *storeOptions) Open() (*cas.Layout, error) { return cas.OpenLayout(o.Path) }

// keyOptions: the signing key and its password.
type keyOptions struct {
	Path string
}

var errNoKey = errors.New("no signing key")

func (o *keyOptions) Flags() []cli.Flag {
	return []cli.Flag{&cli.StringFlag{Name: "key", Usage: "private signing key", EnvVars: []string{envKey}, Value: defaultKey()}}
}

// Parse reads --key; an empty value (FEVAL_KEY set but empty) means the default.
func (o *keyOptions) Parse(c *cli.Context) { o.Path = cmp.Or(c.String("key"), defaultKey()) }

// Signer loads and decrypts the signing key.
func (o *keyOptions) Signer(a *appEnv) (*bundle.Signer, error) {
	wait, err := o.SignerAsync(a)
	if err != nil {
		return nil, err
	}
	return wait()
}

// SignerAsync reads the key file and the password now and decrypts the key
// (scrypt, a fraction of a second of CPU) in the background; the returned
// function waits for it. Work that does not need the key can run meanwhile.
func (o *keyOptions) SignerAsync(a *appEnv) (func() (*bundle.Signer, error), error) {
	pemBytes, err := os.ReadFile(o.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s: run 'feval key generate' or set --key", errNoKey, o.Path)
	}
	if err != nil {
		return nil, err
	}
	pw, err := a.password(false)
	if err != nil {
		return nil, err
	}
	type result struct {
		s   *bundle.Signer
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := bundle.LoadSigner(pemBytes, pw)
		if errors.Is(err, bundle.ErrBadPassword) {
			err = fmt.Errorf("%s: %w (check FEVAL_PASSWORD)", o.Path, err)
		} else if err != nil {
			err = usagef("%s is not a usable private key, it is damaged or truncated (%v): restore it from a backup or create a new one with 'feval key generate'", o.Path, err)
		}
		ch <- result{s, err}
	}()
	return sync.OnceValues(func() (*bundle.Signer, error) {
		r := <-ch
		return r.s, r.err
	}), nil
}

func pubPath(keyPath string) string { return strings.TrimSuffix(keyPath, ".key") + ".pub" }

// trustOptions: the public keys a verification trusts.
type trustOptions struct {
	Keys []string
	own  string
}

func (o *trustOptions) Flags() []cli.Flag {
	return []cli.Flag{&cli.StringSliceFlag{Name: "pub", Aliases: []string{"trust"}, Usage: "trusted public key file (repeatable; default: your own key's .pub)", EnvVars: []string{envPub}}}
}

func (o *trustOptions) Parse(c *cli.Context) {
	o.Keys = slices.DeleteFunc(c.StringSlice("pub"), func(p string) bool { return p == "" }) // FEVAL_PUB= names none
	o.own = pubPath(c.String("key"))
	if o.own == ".pub" {
		o.own = pubPath(defaultKey())
		if v := os.Getenv(envKey); v != "" {
			o.own = pubPath(v)
		}
	}
}

// paths are the files of the trusted keys: --pub, else the caller's own
// public key.
func (o *trustOptions) paths() []string {
	if len(o.Keys) == 0 {
		return []string{o.own}
	}
	return o.Keys
}

// Load reads the trusted keys, in the order of paths.
func (o *trustOptions) Load() ([]*bundle.PublicKey, error) {
	var out []*bundle.PublicKey
	for _, p := range o.paths() {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: public key %s: give --pub FILE or run 'feval key generate'", errNoKey, p)
		}
		if err != nil {
			return nil, err
		}
		k, err := bundle.ParsePublicKey(b)
		if err != nil {
			return nil, usagef("%s: %v", p, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// LoadForAggregate reads the trusted keys of a command that aggregates
// verdicts (leaderboard, frontier, emission, serve): --pub or FEVAL_PUB,
// else the caller's own public key. With none of them it refuses as a usage
// error: an aggregate never counts whoever signed. A named key file that is
// missing stays a not-found error naming it.
func (o *trustOptions) LoadForAggregate() ([]*bundle.PublicKey, error) {
	keys, err := o.Load()
	if errors.Is(err, errNoKey) && len(o.Keys) == 0 {
		return nil, errNoTrustedKey()
	}
	return keys, err
}

// errNoTrustedKey is the refusal of an aggregate without a trusted key.
func errNoTrustedKey() error {
	return usagef("no trusted key: name the validators whose verdicts count with --pub FILE (repeatable) or %s, or make your own with 'feval key generate'", envPub)
}

// remoteOptions: how registries are reached, and how long feval waits for them.
type remoteOptions struct {
	PlainHTTP   bool
	IdleTimeout time.Duration
	Deadline    time.Time // zero: none
}

// Environment variables of the registry deadlines (flag > environment > default).
const (
	envTimeout     = "FEVAL_TIMEOUT"
	envIdleTimeout = "FEVAL_IDLE_TIMEOUT"
)

func (o *remoteOptions) Flags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "plain-http", Usage: "use plain HTTP for a non-loopback registry", EnvVars: []string{envPlainHTTP}},
		&cli.DurationFlag{Name: "timeout", Usage: "give up on the registry after this long in total (0: no limit)", EnvVars: []string{envTimeout}},
		&cli.DurationFlag{Name: "idle-timeout", Usage: "give up on a registry connection that makes no progress for this long", EnvVars: []string{envIdleTimeout}, Value: cas.DefaultIdleTimeout},
	}
}

// Parse reads the flags; the --timeout deadline counts from now.
func (o *remoteOptions) Parse(c *cli.Context) {
	o.PlainHTTP = c.Bool("plain-http")
	o.IdleTimeout = c.Duration("idle-timeout")
	o.Deadline = time.Time{}
	if d := c.Duration("timeout"); d > 0 {
		o.Deadline = time.Now().Add(d)
	}
}

// Open connects to the repository in ref and returns it with the tag or digest
// ref names ("" if none).
func (o *remoteOptions) Open(ref string) (*cas.Remote, string, error) {
	r, err := cas.ParseRemote(ref)
	if err != nil {
		return nil, "", err
	}
	rem, err := cas.OpenRemote(r, cas.RemoteOptions{PlainHTTP: o.PlainHTTP, DockerConfig: dockerConfigFile(),
		IdleTimeout: o.IdleTimeout, Deadline: o.Deadline})
	return rem, r.Reference, err
}

// OpenOptional is Open for an optional flag: it returns nil for an empty ref.
// Callers storing the result in a cas.Store must keep a nil *cas.Remote out of it.
func (o *remoteOptions) OpenOptional(ref string) (*cas.Remote, error) {
	if ref == "" {
		return nil, nil
	}
	r, _, err := o.Open(ref)
	return r, err
}

func dockerConfigFile() string {
	if d := os.Getenv(envDocker); d != "" {
		return d + "/config.json"
	}
	return ""
}

// created returns the artifact creation time: SOURCE_DATE_EPOCH or the epoch.
func created() (string, error) {
	v := os.Getenv(envEpoch)
	if v == "" {
		return bundle.EpochCreated, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return "", usagef("%s=%q: want non-negative Unix seconds", envEpoch, v)
	}
	return time.Unix(n, 0).UTC().Format(time.RFC3339), nil
}

// password returns the key password from the environment or, on a terminal, a
// prompt that does not echo. confirm asks twice.
func (a *appEnv) password(confirm bool) ([]byte, error) {
	if v := os.Getenv(envPassword); v != "" {
		return []byte(v), nil
	}
	if v := os.Getenv(envCosignPass); v != "" {
		return []byte(v), nil
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil || !term.IsTerminal(int(tty.Fd())) {
		return nil, usagef("no key password: set %s (or %s)", envPassword, envCosignPass)
	}
	defer tty.Close()
	fmt.Fprint(tty, "Password for the private key: ")
	pw, err := term.ReadPassword(int(tty.Fd()))
	fmt.Fprintln(tty)
	if err != nil {
		return nil, err
	}
	if confirm {
		fmt.Fprint(tty, "Again: ")
		pw2, err := term.ReadPassword(int(tty.Fd()))
		fmt.Fprintln(tty)
		if err != nil {
			return nil, err
		}
		if string(pw) != string(pw2) {
			return nil, usagef("the passwords differ")
		}
	}
	return pw, nil
}

// publish pushes an artifact with its subjects and referrers (signatures) to a
// registry; what names it in the error.
func publish(ctx context.Context, l *cas.Layout, dst *cas.Remote, desc ociDesc, what string) error {
	if _, err := cas.Copy(ctx, l, dst, desc, cas.CopyOptions{Subjects: true, Referrers: true}); err != nil {
		return fmt.Errorf("pushing %s: %w", what, err)
	}
	return nil
}
