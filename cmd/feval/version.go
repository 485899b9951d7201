package main

import (
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// versionResult is what 'feval version' reports, from the build information
// the Go toolchain embeds in the binary.
type versionResult struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"revision_time,omitempty"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// buildVersion reads bi (nil: no build information) into a versionResult. A
// binary built from a checkout has its VCS revision; 'go install ...@v1.2.3'
// has the module version.
func buildVersion(bi *debug.BuildInfo) versionResult {
	res := versionResult{Module: "github.com/feval/feval", Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return res
	}
	if bi.Main.Path != "" {
		res.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		res.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		res.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			res.Revision = s.Value
		case "vcs.time":
			res.Time = s.Value
		case "vcs.modified":
			res.Modified = s.Value == "true"
		}
	}
	return res
}

func versionCommand(a *appEnv) *cli.Command {
	out := &outputOptions{}
	return &cli.Command{
		Name:  "version",
		Usage: "print feval's version, the source revision it was built from, and the Go version",
		Flags: out.Flags(),
		Action: func(c *cli.Context) error {
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			bi, _ := debug.ReadBuildInfo()
			res := buildVersion(bi)
			return a.render(out, res, func(w *tabw) {
				w.line("feval\t%s", res.Version)
				if res.Revision != "" {
					rev := res.Revision
					if res.Modified {
						rev += " (modified)"
					}
					w.line("revision\t%s", rev)
				}
				if res.Time != "" {
					w.line("revision time\t%s", res.Time)
				}
				w.line("go\t%s %s", res.Go, res.Platform)
			})
		},
	}
}
