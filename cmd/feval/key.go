package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/feval/feval/bundle"
	"github.com/urfave/cli/v2"
)

func keyCommand(a *appEnv) *cli.Command {
	return &cli.Command{
		Name:        "key",
		Usage:       "manage the signing key (cosign-compatible ECDSA P-256)",
		Subcommands: []*cli.Command{keyGenerateCommand(a), keyShowCommand(a)},
	}
}

type keyResult struct {
	Key         string `json:"key,omitempty"`
	Pub         string `json:"pub"`
	Fingerprint string `json:"fingerprint"`
	PEM         string `json:"pem,omitempty"`
}

func keyGenerateCommand(a *appEnv) *cli.Command {
	k, out := &keyOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "generate",
		Usage: "write a new encrypted key pair (KEY and KEY's .pub); the password comes from FEVAL_PASSWORD, COSIGN_PASSWORD or a prompt",
		Flags: flagSet(k.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			k.Parse(c)
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			res, err := generateKey(a, k.Path)
			if err != nil {
				return err
			}
			return a.render(out, res, func(w *tabw) {
				w.line("private key  %s", res.Key)
				w.line("public key   %s", res.Pub)
				w.line("fingerprint  %s", res.Fingerprint)
			})
		},
	}
}

func generateKey(a *appEnv, path string) (keyResult, error) {
	pub := pubPath(path)
	for _, p := range []string{path, pub} {
		if _, err := os.Stat(p); err == nil {
			return keyResult{}, usagef("%s exists: refusing to overwrite a key; choose another --key path", p)
		}
	}
	pw, err := a.password(true)
	if err != nil {
		return keyResult{}, err
	}
	privPEM, pubPEM, err := bundle.GenerateKey(pw)
	if err != nil {
		return keyResult{}, usagef("%v", err)
	}
	pk, err := bundle.ParsePublicKey(pubPEM)
	if err != nil {
		return keyResult{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return keyResult{}, err
	}
	if err := writeNew(path, privPEM, 0o600); err != nil {
		return keyResult{}, err
	}
	if err := writeNew(pub, pubPEM, 0o644); err != nil {
		os.Remove(path)
		return keyResult{}, err
	}
	return keyResult{Key: path, Pub: pub, Fingerprint: pk.Fingerprint}, nil
}

// writeNew creates path with b, failing if it exists, and removes it again on a
// failed write.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

func keyShowCommand(a *appEnv) *cli.Command {
	k, out := &keyOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "show",
		Usage: "print the public key and its fingerprint",
		Flags: flagSet(k.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			k.Parse(c)
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			pub := pubPath(k.Path)
			b, err := os.ReadFile(pub)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w: %s: run 'feval key generate'", errNoKey, pub)
			}
			if err != nil {
				return err
			}
			pk, err := bundle.ParsePublicKey(b)
			if err != nil {
				return usagef("%s: %v", pub, err)
			}
			res := keyResult{Pub: pub, Fingerprint: pk.Fingerprint, PEM: string(pk.PEM)}
			return a.render(out, res, func(w *tabw) {
				w.line("fingerprint %s", res.Fingerprint)
				w.line("%s", res.PEM)
			})
		},
	}
}
