package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// Completion scripts for bash and zsh ask feval itself for candidates (the
// command line so far plus --generate-bash-completion); fish's is generated
// from the command tree.
const bashCompletion = `# bash completion for feval: source <(feval completion bash)
_feval_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  return 0
}
complete -o bashdefault -o default -F _feval_complete feval
`

const zshCompletion = `#compdef feval
# zsh completion for feval: feval completion zsh > "${fpath[1]}/_feval"
_feval() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == -* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
if [[ "$(basename -- ${(%):-%x})" != "_feval" ]]; then
  compdef _feval feval
fi
`

func completionCommand(a *appEnv) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Action: func(c *cli.Context) error {
			if err := args(c, 1, "one shell (bash, zsh or fish)"); err != nil {
				return err
			}
			script, err := completionScript(c.App, c.Args().First())
			if err != nil {
				return err
			}
			_, err = io.WriteString(a.stdout, script)
			return err
		},
	}
}

func completionScript(app *cli.App, shell string) (string, error) {
	switch shell {
	case "bash":
		return bashCompletion, nil
	case "zsh":
		return zshCompletion, nil
	case "fish":
		s, err := app.ToFishCompletion()
		if err != nil {
			return "", fmt.Errorf("generating fish completion: %w", err)
		}
		return s, nil
	}
	return "", usagef("unknown shell %q: want one of bash, zsh, fish", shell)
}

func manCommand(a *appEnv) *cli.Command {
	return &cli.Command{
		Name:  "man",
		Usage: "print feval's manual page (roff, section 1)",
		Action: func(c *cli.Context) error {
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			page, err := c.App.ToManWithSection(1)
			if err != nil {
				return fmt.Errorf("generating the manual page: %w", err)
			}
			_, err = io.WriteString(a.stdout, page)
			return err
		},
	}
}
