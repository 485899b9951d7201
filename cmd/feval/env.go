package main

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/sandbox"
)

// The environment variables feval reads, in one place. Precedence everywhere:
// flag > environment > default.
const (
	envStore      = "FEVAL_STORE"
	envKey        = "FEVAL_KEY"
	envPub        = "FEVAL_PUB"
	envPassword   = "FEVAL_PASSWORD"
	envCosignPass = "COSIGN_PASSWORD"
	envEpoch      = "SOURCE_DATE_EPOCH"
	envDocker     = "DOCKER_CONFIG"
	envPlainHTTP  = "FEVAL_PLAIN_HTTP"
	envMeterKey   = "FEVAL_METER_API_KEY"
	envMeterUp    = "FEVAL_METER_UPSTREAM"
	envNow        = "FEVAL_NOW"
)

type envVar struct {
	Name, Usage string
	Secret      bool
}

func envVars() []envVar {
	return []envVar{
		{envStore, "store directory (default: " + defaultStore() + ")", false},
		{envKey, "private signing key (default: " + defaultKey() + ")", false},
		{envPub, "trusted public keys for verification, comma-separated (default: the signing key's .pub)", false},
		{envNow, "the clock reading 'commit', 'reveal' and 'round open' check a round's windows against, RFC 3339 (default: the system clock)", false},
		{envPassword, "password of the private key", true},
		{envCosignPass, "password of the private key, if FEVAL_PASSWORD is unset", true},
		{envEpoch, "fixed creation time (Unix seconds) for artifacts; default 0", false},
		{envDocker, "directory of the Docker config.json holding registry credentials", false},
		{envPlainHTTP, "set to 1 to use plain HTTP for non-loopback registries", false},
		{envMeterKey, "bearer token the meter sends to model upstreams", true},
		{envMeterUp, "evaluate (scenarios): base URL serving every allowlisted model", false},
		{envTimeout, "overall deadline of a command's registry work, e.g. 10m (default: none)", false},
		{envIdleTimeout, "give up on a registry connection idle this long (default: " + cas.DefaultIdleTimeout.String() + ")", false},
		{sandbox.InitEnv, "sandbox init program (default: " + sandbox.InitProgram + " beside this executable, else this executable)", false},
	}
}

func dataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "feval")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "feval")
	}
	return ".feval"
}

func defaultStore() string { return filepath.Join(dataDir(), "store") }
func defaultKey() string   { return filepath.Join(dataDir(), "keys", "feval.key") }

type envResult struct {
	Vars []envEntry `json:"vars"`
}

// envEntry is one variable: its value in the environment (secrets masked) and
// the value feval actually uses, with where that comes from.
type envEntry struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Set       bool   `json:"set"`
	Effective string `json:"effective"`
	Source    string `json:"source"` // flag, environment, default or unset
	Usage     string `json:"usage"`
}

// Sources of an effective value.
const (
	sourceFlag    = "flag"
	sourceEnv     = "environment"
	sourceDefault = "default"
	sourceUnset   = "unset"
)

const hidden = "(set, hidden)"

// readEnvVars lists the variables feval reads besides its own: where default
// paths come from.
func readEnvVars() []envVar {
	return []envVar{
		{"XDG_DATA_HOME", "base of the default store and key directory ($XDG_DATA_HOME/feval)", false},
		{"HOME", "base of the default directory ($HOME/.local/share/feval) when XDG_DATA_HOME is unset", false},
	}
}

func envCommand(a *appEnv) *cli.Command {
	st, k, out := &storeOptions{}, &keyOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "env",
		Usage: "print the environment variables feval reads, their values (secrets masked) and the values in effect",
		Flags: flagSet(st.Flags(), k.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			k.Parse(c)
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			res := envResult{Vars: []envEntry{}}
			for _, v := range append(envVars(), readEnvVars()...) {
				val, set := os.LookupEnv(v.Name)
				e := envEntry{Name: v.Name, Value: val, Set: set, Usage: v.Usage}
				if v.Secret && set {
					e.Value = hidden
				}
				e.Effective, e.Source = effectiveValue(v, val, set, st, k)
				res.Vars = append(res.Vars, e)
			}
			return a.render(out, res, func(w *tabw) {
				w.row("NAME", "IN EFFECT", "FROM", "MEANING")
				for _, e := range res.Vars {
					val := e.Effective
					if val == "" {
						val = "-"
					}
					w.row(e.Name, val, e.Source, e.Usage)
				}
			})
		},
	}
}

// effectiveValue is the value feval uses for a variable and its source, given
// the options as parsed (flag > environment > default).
func effectiveValue(v envVar, val string, set bool, st *storeOptions, k *keyOptions) (string, string) {
	from := func(flagValue string) string {
		switch {
		case set && flagValue == val:
			return sourceEnv
		case flagValue != defaultFor(v.Name):
			return sourceFlag
		}
		return sourceDefault
	}
	switch v.Name {
	case envStore:
		return absPath(st.Path), from(st.Path)
	case envKey:
		return absPath(k.Path), from(k.Path)
	case envPub:
		if set && val != "" {
			return val, sourceEnv
		}
		return absPath(pubPath(k.Path)), sourceDefault
	case envEpoch:
		ts, err := created()
		switch {
		case err != nil:
			return "invalid: " + err.Error(), sourceEnv
		case set && val != "":
			return ts, sourceEnv
		}
		return ts, sourceDefault
	case envDocker:
		if set && val != "" {
			return filepath.Join(val, "config.json"), sourceEnv
		}
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, ".docker", "config.json"), sourceDefault
		}
		return "", sourceUnset
	case envPlainHTTP:
		if b, err := strconv.ParseBool(val); set && err == nil {
			return strconv.FormatBool(b), sourceEnv
		}
		return "false (loopback registries always use plain HTTP)", sourceDefault
	case "XDG_DATA_HOME":
		if set && val != "" {
			return val, sourceEnv
		}
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, ".local", "share"), sourceDefault
		}
		return "", sourceUnset
	}
	if !set {
		return "", sourceUnset
	}
	if v.Secret {
		return hidden, sourceEnv
	}
	return val, sourceEnv
}

func defaultFor(name string) string {
	switch name {
	case envStore:
		return defaultStore()
	case envKey:
		return defaultKey()
	}
	return ""
}

// absPath makes p absolute for display; it is left as given if that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
