"""Redis: the rules of the kind, one job per module.

A Redis asks for ``spec.num`` pods named ``<name>-<index>``, each running a
container ``redis`` with ``spec.image``, serving on ``spec.port``. For each
object, a pass:
  1. being deleted: deletes its pods, then drops the finalizer once none remain;
  2. no finalizer yet: adds it before any pod exists;
  3. invalid spec: touches no pod, and names the field in status and an event;
  4. creates missing pods, deletes surplus and ended ones, replaces stale pods
     that are not Ready at once and a Ready one at a time, while every other
     desired pod is Ready, through the Eviction API (stale: made for
     another template, or its image changed by hand since it was created;
     never for what admission did to it), and puts back labels, annotation
     and controller reference changed by hand; none of it while
     ``spec.paused`` is true (its deletion still deletes its pods);
  5. writes the status as the pods will be after those actions, only when it
     differs from what is stored, naming the pods a rollout waits on and
     flagging one that stopped moving for longer than progress_deadline.
Pods it does not own are never touched, even when they hold a desired name.

The modules, in the order a pass reads them: `identity` (the object and its
names), `spec` (validation), `pods` (the pods it wants, and how a found pod
is judged), `changes` with `removal`, `rollout` and `repair` (the pod
writes), `service`, `disruption` with `budgeted` (the changes a budget
lets through), `storage` with `quantity` and `claims` (its claims), and
`placement` (what it makes besides pods, and where pods go), `status`,
`order` (the order of its writes), and `kind` (the planner and the `Kind`).
"""
