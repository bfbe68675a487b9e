"""The commands that run against a real account from the operator's machine: `costguard doctor`, `init`
(samconfig.toml), `uninstall`, `redrive`, `audit --live` and `backtest --live`'s account reads. Never loaded by a
Lambda function (the layer leaves ops/ out); the embedded stack the local commands run on is local/."""
