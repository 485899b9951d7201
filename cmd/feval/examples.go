package main

// commandExamples are the examples each command's help shows, by command path.
// Every command has some (TestEveryCommandHasExamples).
var commandExamples = map[string]string{
	"init": `   feval init
   feval init --store /srv/feval/store`,
	"key generate": `   FEVAL_PASSWORD=... feval key generate
   feval key generate --key ~/keys/validator.key`,
	"key show": `   feval key show
   feval key show --json`,
	"pack": `   feval pack --kind submission ./my-submission
   feval pack --kind trace --tag run-7 trace.jsonl`,
	"unpack": `   feval unpack sub1 ./restored
   feval unpack sha256:1f2e3d... ./restored --force`,
	"ls": `   feval ls
   feval ls --kind verdict --json`,
	"inspect": `   feval inspect sub1
   feval inspect sha256:1f2e3d4c5b6a --record`,
	"verify": `   feval verify sub1
   feval verify sub1 --pub alice.pub --from registry.example.com/comp/r1`,
	"push": `   feval push sub1 registry.example.com/comp/r1:sub1`,
	"pull": `   feval pull registry.example.com/comp/r1:round --tag r1
   feval pull registry.example.com/comp/r1@sha256:1f2e3d...`,
	"fsck": `   feval fsck
   feval fsck --json`,
	"env": `   feval env
   feval env --json`,
	"task create": `   feval task create --protocol rollouts --tag task ./task`,
	"round open": `   feval round open --task task --commit-until 2026-12-01T00:00:00Z \
       --reveal-until 2026-12-02T00:00:00Z --tag r1`,
	"commit":  `   feval commit --round r1 --to registry.example.com/comp/r1 ./my-submission`,
	"reveal":  `   feval reveal --to registry.example.com/comp/r1 sha256:1f2e3d...`,
	"reveals": `   feval reveals --round r1 --from registry.example.com/comp/r1`,
	"sample":  `   feval sample --beacon 5e1f... --beacon-source drand:quicknet:12345 sha256:1f2e3d...`,
	"evaluate": `   feval evaluate --task task --from registry.example.com/comp/r1 --to registry.example.com/comp/r1 \
       --beacon 5e1f... --beacon-source drand:quicknet:12345 sha256:1f2e3d...
   feval evaluate --task task --round r1 --beacon 5e1f... --beacon-source drand:quicknet:12345 --json
   feval evaluate --task task --full --beacon 5e1f... --beacon-source drand:quicknet:12345 sha256:1f2e3d... sha256:4a5b6c...`,
	"replay": `   feval replay sha256:9a8b7c...
   feval replay --from registry.example.com/comp/r1 --pub validator.pub sha256:9a8b7c...
   feval replay --json sha256:9a8b7c... sha256:3c4d5e...`,
	"consensus":   `   feval consensus --round r1 --stakes stakes.json --from registry.example.com/comp/r1`,
	"leaderboard": `   feval leaderboard --round r1 --from registry.example.com/comp/r1 --consensus sha256:5d6e...`,
	"frontier":    `   feval frontier --events runs.json --baseline 3200000`,
	"emission":    `   feval emission --events runs.json --baseline 3200000 --at 14d`,
	"record": `   feval record --kind receipts receipts.json
   echo '{"note":"x"}' | feval record --kind note --subject sub1 -`,
	"sandbox check": `   feval sandbox check`,
	"sandbox run": `   feval sandbox run -- /bin/true
   feval sandbox run --input ./data:data --output ./out -- /usr/bin/python3 /in/data/train.py`,
	"meter serve": `   feval meter serve --task sha256:1f2e3d... --listen unix:/run/feval/meter.sock --record --subject sha256:9a8b7c...
   feval meter serve --config meter.json --listen 127.0.0.1:8400 --upstream http://127.0.0.1:8500
   feval meter serve --task sha256:1f2e3d... --replay sha256:4d5e6f... --listen unix:meter.sock`,
	"rollouts generate": `   feval rollouts generate --round r1 --model sha256:0b6dd3... ./submission
   feval rollouts generate --runtime 'python3 serve.py --model {model}' --round r1 --model sha256:0b6dd3... ./submission
   feval commit --round r1 ./submission`,
	"rollouts check-runtime": `   feval rollouts check-runtime --runtime 'python3 serve.py --model {model}'
   feval rollouts check-runtime --rows 64 --json --runtime 'python3 serve.py --model {model}'`,
	"policy try": `   feval policy try ./my-pack
   feval policy try --config meter.json --upstream http://127.0.0.1:8500/v1 --json ./my-pack`,
	"version": `   feval version
   feval --version`,
	"completion": `   source <(feval completion bash)
   feval completion zsh > "${fpath[1]}/_feval"
   feval completion fish > ~/.config/fish/completions/feval.fish`,
	"man": `   feval man > feval.1 && man ./feval.1`,
}
