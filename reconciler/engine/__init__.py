"""One pass: observe, plan, apply.

`sync` runs it for `reconciler sync`, `plan` and `run` alike; `plan` is pure,
`observe` reads and `apply` (with `events`) is the only writer. `state` and
`report` keep what the pod report compares between passes."""
