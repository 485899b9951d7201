package main

import (
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"
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
		{envPassword, "password of the private key", true},
		{envCosignPass, "password of the private key, if FEVAL_PASSWORD is unset", true},
		{envEpoch, "fixed creation time (Unix seconds) for artifacts; default 0", false},
		{envDocker, "directory of the Docker config.json holding registry credentials", false},
		{envPlainHTTP, "set to 1 to use plain HTTP for non-loopback registries", false},
		{envMeterKey, "bearer token the meter sends to model upstreams", true},
		{envMeterUp, "evaluate (scenarios): base URL serving every allowlisted model", false},
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

type envEntry struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Set   bool   `json:"set"`
	Usage string `json:"usage"`
}

func envCommand(a *appEnv) *cli.Command {
	out := &outputOptions{}
	return &cli.Command{
		Name:  "env",
		Usage: "print the environment variables feval reads and their values (secrets masked)",
		Flags: out.Flags(),
		Action: func(c *cli.Context) error {
			out.Parse(c)
			var res envResult
			for _, v := range envVars() {
				val, set := os.LookupEnv(v.Name)
				if v.Secret && set {
					val = "(set, hidden)"
				}
				res.Vars = append(res.Vars, envEntry{v.Name, val, set, v.Usage})
			}
			return a.render(out, res, func(w *tabw) {
				for _, e := range res.Vars {
					val := e.Value
					if !e.Set {
						val = "(unset)"
					}
					w.row(e.Name, val, e.Usage)
				}
			})
		},
	}
}
