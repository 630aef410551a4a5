#!/usr/bin/env bash
# run_slurm_test.sh — the batch scripts of slurm/ against a real SLURM on this machine.
#
# Starts munged (as user munge) and a one-node cluster (slurmctld, slurmd) on 127.0.0.1 with a
# configuration of its own in a temporary directory: 8 CPUs declared whatever the machine has
# (config_overrides) and 4 "GPUs" as GRES backed by character devices made with mknod, so that
# SLURM hands out CUDA_VISIBLE_DEVICES as on a GPU node. Then, with the CPU engine:
#   - srun with --gpus-per-task=1 gives each task its own device;
#   - histeq_srun.sbatch and histeq_mpirun.sbatch equal a direct `mpirun -np 2` byte for byte,
#     each rank of the srun job saw one GPU, each rank of the mpirun job all the node's;
#   - a failing run's exit status (4, bad input) is the job's, through srun and through mpirun;
#   - USR1 (as before the time limit) makes the job requeue itself, and the requeued run
#     finishes the output, its log appended to the first attempt's; with --time=5, within the
#     scripts' warning time, SLURM sends it itself and HQ_MAX_REQUEUES=1 stops a second requeue;
#   - histeq_array.sbatch cuts a list of PNGs and HDF5 files into 3 parts, and all its outputs
#     equal the direct runs; submitted again, it finds every part done, and with another
#     number of parts it refuses (status 2), as it does a list with two PNGs of one name and an
#     HDF5 input whose output would be itself;
#   - a rank killed mid-run fails the job, and the job submitted again resumes it; scancel of a
#     running job makes rank 0 say how to finish it, and the job submitted again resumes it.
# The daemons are always stopped and the directory removed (HQ_KEEP=1 keeps it), also on failure
# or on SIGTERM; every wait has a deadline. Needs root (slurmd runs the jobs as root here).
#
#   HQ_BIN=build/histeq_dist bash tests/slurm/run_slurm_test.sh      (make test-slurm)
# shellcheck disable=SC2015,SC2012,SC2016  # `A && B || fail` (fail exits), ls of known names, $ in bash -c
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BIN=$(readlink -f "${HQ_BIN:-$repo/build/histeq_dist}")
PY=${HQ_PYTHON:-/usr/bin/python3}
read -r -a MPIRUN_FLAGS <<< "${HQ_MPIRUN_FLAGS:---oversubscribe --allow-run-as-root}"
SLURM_SCRIPTS=$repo/slurm
START=$SECONDS

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok   $* ($((SECONDS - START)) s)"; }

[ "$(id -u)" = 0 ] || fail "needs root: slurmd runs the jobs and munged is started as user munge"
[ -x "$BIN" ] || fail "$BIN is not built (make CUDA=0)"
for c in munged mungekey slurmctld slurmd sbatch srun squeue scontrol scancel sinfo setpriv mpirun h5diff; do
    command -v "$c" >/dev/null || fail "$c not found: run .ci/deps.sh"
done
id munge >/dev/null 2>&1 || fail "no user munge: install the munge package"
# A test started from inside a SLURM job must not talk to that job's cluster.
while read -r v; do unset "$v"; done < <(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p')

T=$(mktemp -d /tmp/hq-slurm.XXXXXX)
chmod 755 "$T"   # munged checks that every directory above its socket is searchable by all
mkdir -p "$T"/{state,spool,log,dev,work,in,ref,out}
PIDS=()          # daemons started here, stopped in reverse order

stop_pid() { # PID NAME: TERM, up to 10 s, then KILL
    local p=$1 i
    kill -0 "$p" 2>/dev/null || return 0
    kill -TERM "$p" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.2; done
    echo "$2 ($p) did not stop on TERM; killing it" >&2
    kill -KILL "$p" 2>/dev/null || true
}

# Job steps (slurmstepd and the tasks under it) outlive slurmd: find those of this cluster by what
# they hold open under $T.
stray_pids() {
    local p f
    for p in /proc/[0-9]*; do
        [ "${p#/proc/}" = $$ ] || [ "${p#/proc/}" = "$BASHPID" ] && continue
        for f in "$p/cwd" "$p"/fd/*; do
            case $(readlink "$f" 2>/dev/null) in "$T"/*) echo "${p#/proc/}"; break ;; esac
        done
    done
}

cleanup() {
    local rc=$? i p
    trap - EXIT INT TERM
    if [ "$rc" != 0 ]; then
        echo "---- run_slurm_test.sh failed (status $rc); logs from $T:" >&2
        for f in "$T"/log/* "$T"/work/*.out; do
            [ -f "$f" ] || continue
            echo "---- $f" >&2; tail -n 40 "$f" >&2
        done
    fi
    if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
        timeout 10 scancel --full --user=root >/dev/null 2>&1 || true
        for i in $(seq 20); do
            [ -z "$(timeout 5 squeue -h 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
    for (( i = ${#PIDS[@]} - 1; i >= 0; i-- )); do stop_pid "${PIDS[i]%%:*}" "${PIDS[i]#*:}"; done
    for p in $(stray_pids); do echo "stopping leftover job process $p" >&2; kill -KILL "$p" 2>/dev/null || true; done
    if [ "${HQ_KEEP:-0}" = 1 ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "run_slurm_test.sh: interrupted" >&2; exit 124' INT TERM

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ---- munge ----------------------------------------------------------------------------------------
mkdir -m 755 "$T/munge"
mungekey --create --keyfile="$T/munge/munge.key" 2>/dev/null ||
    dd if=/dev/urandom of="$T/munge/munge.key" bs=1 count=1024 status=none
chmod 600 "$T/munge/munge.key"
chown -R munge:munge "$T/munge"
SOCK=$T/munge/munge.sock
setpriv --reuid=munge --regid=munge --clear-groups \
    munged --foreground --socket="$SOCK" --key-file="$T/munge/munge.key" \
    --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/munged.seed" >"$T/log/munged.log" 2>&1 &
PIDS+=("$!:munged")
for i in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
timeout 10 munge --socket="$SOCK" -n </dev/null | timeout 10 unmunge --socket="$SOCK" >/dev/null ||
    fail "munged does not answer on $SOCK"
ok "munged up"

# ---- slurm --------------------------------------------------------------------------------------
HOST=$(uname -n); HOST=${HOST%%.*}
for i in 0 1 2 3; do mknod "$T/dev/nvidia$i" c 1 3; done
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
cat >"$T/slurm.conf" <<EOF
ClusterName=hqtest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK,cred_expire=10
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=8 RealMemory=4000 Gres=gpu:4 State=UNKNOWN
PartitionName=hq Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$T/gres.conf" <<EOF
AutoDetect=off
Name=gpu File=$T/dev/nvidia[0-3]
EOF
export SLURM_CONF=$T/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
PIDS+=("$!:slurmctld")
slurmd -D -f "$SLURM_CONF" -N "$HOST" >"$T/log/slurmd.out" 2>&1 &
PIDS+=("$!:slurmd")
state=""
for i in $(seq 60); do
    state=$(timeout 5 sinfo -h -n "$HOST" -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.5
done
[ "$state" = idle ] || fail "node $HOST is '${state:-not there}', not idle, after 30 s"
ok "slurmctld and slurmd up, node $HOST idle ($(sinfo -V))"

# ---- GRES: each task its own device -------------------------------------------------------------
gpus=$(timeout 60 srun -n 2 --gpus-per-task=1 --time=1 bash -c 'echo "$SLURM_PROCID ${CUDA_VISIBLE_DEVICES-unset}"' | sort)
while read -r l; do echo "     srun --gpus-per-task=1: task $l"; done <<< "$gpus"
[ "$(echo "$gpus" | wc -l)" = 2 ] || fail "expected 2 tasks, got: $gpus"
[ "$(echo "$gpus" | awk '$2 ~ /^[0-9]+$/ { print $2 }' | sort -u | wc -l)" = 2 ] ||
    fail "each task should see one device of its own in CUDA_VISIBLE_DEVICES, got: $gpus"
ok "CUDA_VISIBLE_DEVICES set per task from the GRES"

# ---- inputs and the direct runs they must equal ---------------------------------------------------
"$PY" "$here/make_inputs.py" "$T/in"
cp "$T/in/h5s/a.h5" "$T/ref_a_before.h5"
direct() { timeout 120 mpirun "${MPIRUN_FLAGS[@]}" -np 2 "$BIN" --device cpu -q "$@"; }
direct -i "$T/in/stack.h5" -o "$T/ref/stack.h5"
direct -i "$T/in/pngs" -o "$T/ref/pngs" --scope image
direct -i "$T/in/h5s/a.h5" -o "$T/ref/a.h5" --scope image
direct -i "$T/in/h5s/b.h5:/vol" -o "$T/ref/b_vol.h5" --scope image
ok "direct mpirun -np 2 references"

# HQ_BIN for the jobs: records what each rank saw (rank, CUDA_VISIBLE_DEVICES) and, when
# HQ_TEST_HOLD names a file, on the job's first attempt touches it and waits to be requeued.
cat >"$T/histeq_wrap" <<EOF
#!/bin/bash
rank=\${OMPI_COMM_WORLD_RANK:-\${SLURM_PROCID:-x}}
echo "\${CUDA_VISIBLE_DEVICES-unset}" > "$T/work/ranks.\$SLURM_JOB_ID.\$rank"
if [ -n "\${HQ_TEST_HOLD:-}" ] && [ "\${SLURM_RESTART_COUNT:-0}" = 0 ]; then
    touch "\$HQ_TEST_HOLD"
    sleep 100
fi
exec "$BIN" "\$@"
EOF
chmod 755 "$T/histeq_wrap"

# sbatch with the test's geometry: 10 minutes, so that the scripts' --signal=B:USR1@300 is not
# due (but where a job is given --time=5); 2 ranks of 1 CPU, a GPU each (the scripts' --gpus-per-task=1;
# the mpirun script's --gpus-per-node is given as 2 where it is submitted).
submit() { # SCRIPT LOGNAME [sbatch options...] ; the job's environment comes from env before it
    local script=$1 log=$2
    shift 2
    timeout 30 sbatch --parsable --chdir="$T/work" --output="$T/work/$log" --ntasks-per-node=2 \
        --cpus-per-task=1 --time=10 "$@" "$SLURM_SCRIPTS/$script" | cut -d';' -f1
}
export HQ_BIN=$T/histeq_wrap HQ_DEVICE=cpu HQ_PROGRESS=1

jobs_done() { # JOBID: all its jobs (array tasks) in a final state
    local s
    s=$(timeout 10 scontrol show job -o "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | sort -u) || return 1
    [ -n "$s" ] && ! echo "$s" | grep -q -E '=(PENDING|RUNNING|REQUEUED|COMPLETING|CONFIGURING|SUSPENDED|RESIZING|REQUEUE_HOLD|REQUEUE_FED|STOPPED|SIGNALING|STAGE_OUT)$'
}
wait_jobs() { # SECONDS JOBID...
    local limit=$1 j
    shift
    for j in "$@"; do
        while ! jobs_done "$j"; do
            (( SECONDS - START < limit )) || fail "job $j not finished after ${limit} s: $(scontrol show job -o "$j" | grep -o 'JobState=[A-Z_]*' | tr '\n' ' ')"
            sleep 0.5
        done
    done
}
job_field() { timeout 10 scontrol show job -o "$1" | grep -o "\\b$2=[^ ]*" | cut -d= -f2 | sort -u | tr '\n' ' ' | sed 's/ $//'; }
expect_job() { # JOBID STATE EXITCODE [RESTARTS]
    local st ec rs
    st=$(job_field "$1" JobState); ec=$(job_field "$1" ExitCode); rs=$(job_field "$1" Restarts)
    [ "$st" = "$2" ] && [ "$ec" = "$3" ] && [ "$rs" = "${4:-0}" ] ||
        fail "job $1: JobState=$st ExitCode=$ec Restarts=$rs, expected $2 $3 ${4:-0}"
}
# Datasets, types, shapes, chunks, filters and histeq_dist's histograms; not the attributes that
# record the command line, which differ between the direct runs and the jobs' wrapper.
same_h5() {
    PYTHONPATH="$here/../integration" "$PY" -c 'import sys, helpers; helpers.assert_same_output(sys.argv[1], sys.argv[2])' \
        "$1" "$2" 2>/dev/null || fail "$2 differs from the direct run $1"
}
same_dir() { # the PNGs (a finished directory also holds histeq_dist.complete, checked where it is one)
    [ "$(cd "$1" && ls ./*.png)" = "$(cd "$2" && ls ./*.png)" ] ||
        fail "$2 holds $(cd "$2" && ls | tr '\n' ' '), not $(cd "$1" && ls | tr '\n' ' ')"
    local f
    for f in "$1"/*.png; do cmp "$f" "$2/${f##*/}" || fail "$2/${f##*/} differs from the direct run"; done
}

# ---- the jobs, submitted together ----------------------------------------------------------------
J_SRUN=$(HQ_INPUT=$T/in/stack.h5 HQ_OUTPUT=$T/out/srun.h5 submit histeq_srun.sbatch srun.out)
J_MPIRUN=$(HQ_INPUT=$T/in/pngs HQ_OUTPUT=$T/out/mpirun_pngs HQ_SCOPE=image HQ_MPIRUN_FLAGS="${MPIRUN_FLAGS[*]}" \
           submit histeq_mpirun.sbatch mpirun.out --gpus-per-node=2)
J_BAD_SRUN=$(HQ_INPUT=$T/in/missing.h5 HQ_OUTPUT=$T/out/bad1.h5 submit histeq_srun.sbatch bad_srun.out)
J_BAD_MPIRUN=$(HQ_INPUT=$T/in/missing.h5 HQ_OUTPUT=$T/out/bad2.h5 HQ_MPIRUN_FLAGS="${MPIRUN_FLAGS[*]}" \
               submit histeq_mpirun.sbatch bad_mpirun.out --gpus-per-node=2)
J_REQ=$(HQ_INPUT=$T/in/stack.h5 HQ_OUTPUT=$T/out/requeued.h5 HQ_TEST_HOLD=$T/work/hold HQ_REQUEUE_MIN_RUN=0 \
        submit histeq_srun.sbatch requeue.out)
# --time=5 is within the scripts' 300 s warning, so SLURM itself sends USR1 as the job starts.
J_TL=$(HQ_INPUT=$T/in/stack.h5 HQ_OUTPUT=$T/out/timelimit.h5 HQ_TEST_HOLD=$T/work/hold_tl HQ_REQUEUE_MIN_RUN=0 \
       HQ_MAX_REQUEUES=1 submit histeq_srun.sbatch timelimit.out --time=5)
J_ARRAY=$(HQ_LIST=$T/in/array.list HQ_OUTPUT=$T/out/array submit histeq_array.sbatch array-%a.out --array=0-2)
J_DUPS=$(HQ_LIST=$T/in/dups.list HQ_OUTPUT=$T/out/dups submit histeq_array.sbatch dups-%a.out --array=0-1)
J_SELF=$(HQ_LIST=$T/in/self.list HQ_OUTPUT=$T/in/h5s submit histeq_array.sbatch self-%a.out --array=0)
ok "submitted: srun $J_SRUN, mpirun $J_MPIRUN, failing $J_BAD_SRUN $J_BAD_MPIRUN, requeue $J_REQ $J_TL, array $J_ARRAY $J_DUPS $J_SELF"

# ---- requeue near the time limit ----------------------------------------------------------------
for i in $(seq 120); do [ -e "$T/work/hold" ] && break; sleep 0.5; done
[ -e "$T/work/hold" ] || fail "the requeue job $J_REQ did not start its run within 60 s"
timeout 10 scancel --batch --signal=USR1 "$J_REQ"   # what --signal=B:USR1@300 sends before the limit

wait_jobs 150 "$J_SRUN" "$J_MPIRUN" "$J_BAD_SRUN" "$J_BAD_MPIRUN" "$J_REQ" "$J_TL" "$J_ARRAY" "$J_DUPS" "$J_SELF"
ok "all jobs finished"

# A list with two PNGs of one name fails in every part alike, before any run; so does an HDF5
# input whose output would be itself (which an earlier script took for done and skipped).
for k in 0 1; do
    grep -q "several PNG inputs are named p0.png" "$T/work/dups-$k.out" || fail "dups-$k.out does not name p0.png"
done
expect_job "$J_DUPS" FAILED 2:0
grep -q "would be the input itself" "$T/work/self-0.out" || fail "self-0.out does not say why it refused"
expect_job "$J_SELF" FAILED 2:0
cmp -s "$T/in/h5s/a.h5" "$T/ref_a_before.h5" || fail "the array changed its input h5s/a.h5"
ok "histeq_array.sbatch refuses PNGs of one name and an output that would be its input (exit status 2)"

expect_job "$J_SRUN" COMPLETED 0:0
same_h5 "$T/ref/stack.h5" "$T/out/srun.h5"
for r in 0 1; do
    g=$(cat "$T/work/ranks.$J_SRUN.$r" 2>/dev/null) || fail "rank $r of the srun job left no record"
    [[ $g =~ ^[0-9]+$ ]] || fail "rank $r of the srun job saw CUDA_VISIBLE_DEVICES='$g', not one device"
done
[ "$(cat "$T/work/ranks.$J_SRUN.0")" != "$(cat "$T/work/ranks.$J_SRUN.1")" ] || fail "the srun job's ranks shared a device"
ok "histeq_srun.sbatch: HDF5 output equals mpirun -np 2; rank GPUs $(cat "$T/work/ranks.$J_SRUN.0"), $(cat "$T/work/ranks.$J_SRUN.1")"

expect_job "$J_MPIRUN" COMPLETED 0:0
same_dir "$T/ref/pngs" "$T/out/mpirun_pngs"
[ -e "$T/out/mpirun_pngs/histeq_dist.complete" ] || fail "the mpirun job's directory is not marked complete"
for r in 0 1; do
    g=$(cat "$T/work/ranks.$J_MPIRUN.$r" 2>/dev/null) || fail "rank $r of the mpirun job left no record"
    [[ $g =~ ^[0-9]+,[0-9]+$ ]] || fail "rank $r of the mpirun job saw CUDA_VISIBLE_DEVICES='$g', not the node's 2"
done
ok "histeq_mpirun.sbatch: PNG directory equals mpirun -np 2; every rank sees GPUs $(cat "$T/work/ranks.$J_MPIRUN.0")"

for j in "$J_BAD_SRUN:bad_srun.out" "$J_BAD_MPIRUN:bad_mpirun.out"; do
    expect_job "${j%%:*}" FAILED 4:0
    grep -q "histeq_dist: .*missing.h5" "$T/work/${j#*:}" || fail "${j#*:} lacks histeq_dist's error line"
    [ ! -e "$T/out/bad1.h5" ] && [ ! -e "$T/out/bad2.h5" ] || fail "a failed job left an output"
done
ok "a bad input fails the job with histeq_dist's status 4 (srun and mpirun)"

expect_job "$J_REQ" COMPLETED 0:0 1
same_h5 "$T/ref/stack.h5" "$T/out/requeued.h5"
grep -q "requeueing (restart 1" "$T/work/requeue.out" || fail "requeue.out does not say it requeued"
grep -q "(restart 0)" "$T/work/requeue.out" && grep -q "(restart 1)" "$T/work/requeue.out" ||
    fail "requeue.out does not hold both attempts (--open-mode=append)"
ok "USR1 requeued the job; the second attempt finished it, output equals mpirun -np 2"

expect_job "$J_TL" COMPLETED 0:0 1
same_h5 "$T/ref/stack.h5" "$T/out/timelimit.h5"
grep -q "requeueing (restart 1 of at most 1)" "$T/work/timelimit.out" || fail "timelimit.out does not say it requeued"
ok "SLURM's own --signal=B:USR1@300 requeued the job once (HQ_MAX_REQUEUES=1), which then finished"

[ "$(job_field "$J_ARRAY" JobState)" = COMPLETED ] && [ "$(job_field "$J_ARRAY" ExitCode)" = 0:0 ] ||
    fail "array $J_ARRAY: $(scontrol show job -o "$J_ARRAY" | grep -o -E '(JobId|JobState|ExitCode)=[^ ]*' | tr '\n' ' ')"
[ "$(timeout 10 scontrol show job -o "$J_ARRAY" | wc -l)" = 3 ] || fail "array $J_ARRAY did not run 3 tasks"
mkdir "$T/out/array_pngs"
for d in "$T"/out/array/part_*; do cp "$d"/*.png "$T/out/array_pngs/"; done
[ "$(cd "$T/out/array" && ls -d part_* | tr '\n' ' ')" = "part_0000 part_0001 part_0002 " ] ||
    fail "array parts: $(ls "$T/out/array")"
same_dir "$T/ref/pngs" "$T/out/array_pngs"
same_h5 "$T/ref/a.h5" "$T/out/array/a.h5"
same_h5 "$T/ref/b_vol.h5" "$T/out/array/b_vol.h5"
ls "$T/out/array/.histeq_parts/"part_000{0,1,2}.done >/dev/null || fail "array parts not all marked done"
ok "histeq_array.sbatch: 3 parts, 6 PNGs and 2 HDF5 inputs equal the direct runs"

J_AGAIN=$(HQ_LIST=$T/in/array.list HQ_OUTPUT=$T/out/array submit histeq_array.sbatch again-%a.out --array=1-2)
wait_jobs 170 "$J_AGAIN"
[ "$(job_field "$J_AGAIN" JobState)" = COMPLETED ] || fail "resubmitted array $J_AGAIN: $(job_field "$J_AGAIN" JobState)"
grep -q "part_0001 is already done" "$T/work/again-1.out" && grep -q "part_0002 is already done" "$T/work/again-2.out" ||
    fail "the resubmitted array did not find its parts done"
ok "histeq_array.sbatch submitted again: every part found done"

J_PARTS=$(HQ_LIST=$T/in/array.list HQ_OUTPUT=$T/out/array HQ_PARTS=2 submit histeq_array.sbatch parts-%a.out --array=0)
wait_jobs 180 "$J_PARTS"
expect_job "$J_PARTS" FAILED 2:0
grep -q "was started with 3 parts, not 2" "$T/work/parts-0.out" || fail "parts-0.out does not say why it refused"
ok "histeq_array.sbatch refuses another cut of a list it started (exit status 2)"

# NAME: the interrupted job left out/NAME.h5.part and its journal, not out/NAME.h5; the same job
# submitted again (its log LOG) resumes, and the output equals the direct run, its journal gone.
resumes() { # NAME LOG
    local out=$T/out/$1.h5 j
    [ ! -e "$out" ] && [ -e "$out.part" ] && [ -d "$out.journal" ] ||
        fail "the interrupted job should leave $1.h5.part and its journal, not $1.h5"
    j=$(HQ_INPUT=$T/in/stack.h5 HQ_OUTPUT=$out HQ_EXTRA="--block 2K" HQ_JOURNAL_FLUSH_S=0 submit histeq_srun.sbatch "$2")
    wait_jobs 300 "$j"
    expect_job "$j" COMPLETED 0:0
    grep -q "resuming" "$T/work/$2" || fail "$2 does not say it resumed"
    same_h5 "$T/ref/stack.h5" "$out"
    [ ! -e "$out.journal" ] || fail "the journal outlived the finished output"
}

# A rank killed mid-run (the HQ_FAULT_KILL hook: SIGKILL after its 2nd written block, the journal
# flushed at every record): the job fails naming the rank; the same job submitted again resumes
# from the journal and the output equals the direct run.
J_KILL=$(HQ_INPUT=$T/in/stack.h5 HQ_OUTPUT=$T/out/killed.h5 HQ_EXTRA="--block 2K" HQ_FAULT_KILL=1:2 \
         HQ_JOURNAL_FLUSH_S=0 HQ_MAX_REQUEUES=0 submit histeq_srun.sbatch killed.out)
wait_jobs 240 "$J_KILL"
[ "$(job_field "$J_KILL" JobState)" = FAILED ] || fail "the job with a killed rank ended $(job_field "$J_KILL" JobState)"
resumes killed resumed.out
ok "a rank killed mid-job: the job failed; submitted again, it resumed and equals mpirun -np 2"

# scancel of a running job (SIGTERM to its steps): rank 0 says how to finish the run, the output
# stays unfinished with its journal, and the same job submitted again resumes it. The ranks stop
# after their 2nd written block (HQ_FAULT_STALL) so that scancel finds the job mid-way.
J_CANCEL=$(HQ_INPUT=$T/in/stack.h5 HQ_OUTPUT=$T/out/cancelled.h5 HQ_EXTRA="--block 2K" HQ_FAULT_STALL=0:2 \
           HQ_JOURNAL_FLUSH_S=0 HQ_MAX_REQUEUES=0 submit histeq_srun.sbatch cancelled.out)
for i in $(seq 240); do [ -s "$T/out/cancelled.h5.journal/rank-000000.log" ] && break; sleep 0.5; done
[ -s "$T/out/cancelled.h5.journal/rank-000000.log" ] || fail "the job $J_CANCEL wrote no block within 120 s"
timeout 10 scancel "$J_CANCEL"
wait_jobs 120 "$J_CANCEL"
[ "$(job_field "$J_CANCEL" JobState)" = CANCELLED ] || fail "the cancelled job ended $(job_field "$J_CANCEL" JobState)"
grep -q "cancelled.h5: interrupted by SIGTERM; the work done is kept (.*cancelled.h5.journal): run again with --resume to finish" \
    "$T/work/cancelled.out" || fail "cancelled.out does not say how to finish the run: $(grep histeq_dist "$T/work/cancelled.out")"
resumes cancelled cancelled_again.out
ok "scancel mid-run: rank 0 said how to finish it; submitted again, it resumed and equals mpirun -np 2"

echo "run_slurm_test.sh: all passed in $((SECONDS - START)) s"
