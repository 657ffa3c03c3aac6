#!/usr/bin/env bash
# Checkpoint/restart through the CLI: a run stopped after 10 steps and resumed from its
# checkpoint saves a model byte-identical to the uninterrupted run (dropout included) and
# reports the same loss and accuracy for every epoch, at 1, 2 and 3 ranks; a corrupt or
# truncated checkpoint, or one of another run (training-set size), is a clear error (one
# line, exit 1, no MPI_Abort), not a crash. The resumed run says where it continued and
# counts only its own steps; resuming a finished run says there is nothing left to do.
# hpml-test: timeout=240
set -eu
: "${HPML:?}" "${MPIRUN:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
args=(--model "conv 4 5x5 pad2 relu | pool 2 | dropout 0.25 | dense 32 relu | dense 10"
      --epochs 2 --batch 50 --train-limit 600 --test-limit 200 --no-progress --seed 7)
# The epoch lines' loss and accuracy columns (epoch, steps, loss, train, test_loss, test).
report() { grep -E '^ +[0-9]' "$1" | awk '{print $1, $2, $3, $4, $5, $6}'; }
for np in 1 2 3; do
    rm -rf "$tmp/ck"
    $MPIRUN -np $np "$HPML" train "${args[@]}" --save "$tmp/full.hpml" >"$tmp/full.txt"
    $MPIRUN -np $np "$HPML" train "${args[@]}" --checkpoint "$tmp/ck" --checkpoint-every 10 \
        --max-steps 10 >/dev/null
    [ -f "$tmp/ck/checkpoint.hpml" ] || { echo "no checkpoint written"; exit 1; }
    cp "$tmp/ck/checkpoint.hpml" "$tmp/good.hpml"
    $MPIRUN -np $np "$HPML" train "${args[@]}" --checkpoint "$tmp/ck" --resume \
        --save "$tmp/resumed.hpml" >"$tmp/resumed.txt"
    cmp "$tmp/full.hpml" "$tmp/resumed.hpml" || { echo "np=$np: resumed model differs"; exit 1; }
    [ "$(report "$tmp/full.txt" | wc -l)" = 2 ] || { cat "$tmp/full.txt"; echo "no report"; exit 1; }
    if ! diff <(report "$tmp/full.txt") <(report "$tmp/resumed.txt"); then
        echo "np=$np: the resumed run reports another loss or accuracy"; exit 1
    fi
    # It says what it resumed and counts this run's 14 of the 24 steps; a resume of the
    # finished run has nothing left to do and says so.
    grep -q "^# resumed from epoch 1, step 10$" "$tmp/resumed.txt" &&
        grep -q "^# trained 14 steps in .* (after the 10 resumed from)" "$tmp/resumed.txt" ||
        { cat "$tmp/resumed.txt"; echo "np=$np: the resume does not say what it resumed"; exit 1; }
    if [ $np = 1 ]; then
        $MPIRUN -np 1 "$HPML" train "${args[@]}" --checkpoint "$tmp/ck" --resume >"$tmp/again.txt"
        grep -q "nothing left to train" "$tmp/again.txt" && ! grep -qE '^ +[0-9]' "$tmp/again.txt" ||
            { cat "$tmp/again.txt"; echo "a resume of a finished run does not say so"; exit 1; }
    fi
    echo "resume np=$np: bit-identical model, the same report, says what it resumed"
done

# A checkpoint of another run: here another training-set size.
if $MPIRUN -np 2 "$HPML" train "${args[@]/600/300}" --checkpoint "$tmp/ck" --resume \
    >"$tmp/o" 2>"$tmp/e"; then
    echo "a checkpoint of 600 samples resumed on 300"; exit 1
fi
grep -q "the checkpoint was made on 600 training samples, this run has 300" "$tmp/e" ||
    { cat "$tmp/e"; echo "no clear message"; exit 1; }
[ "$(grep -c '^hpml train:' "$tmp/e")" = 1 ] || { cat "$tmp/e"; echo "not one line"; exit 1; }

# Corrupt one byte: clear error naming the checksum, non-zero exit. The byte is inverted,
# not overwritten with a constant, which the byte may already hold.
cp "$tmp/good.hpml" "$tmp/ck/checkpoint.hpml"
byte=$(od -An -tu1 -j200 -N1 "$tmp/good.hpml" | tr -d ' ')
printf "\\$(printf '%03o' $((255 - byte)))" |
    dd of="$tmp/ck/checkpoint.hpml" bs=1 seek=200 conv=notrunc status=none
cmp -s "$tmp/good.hpml" "$tmp/ck/checkpoint.hpml" && { echo "the corruption changed nothing"; exit 1; }
if $MPIRUN -np 2 "$HPML" train "${args[@]}" --checkpoint "$tmp/ck" --resume >"$tmp/o" 2>"$tmp/e"; then
    echo "corrupt checkpoint accepted"; exit 1
fi
grep -q "checksum mismatch" "$tmp/e" || { cat "$tmp/e"; echo "no clear message"; exit 1; }
[ "$(grep -c '^hpml train:' "$tmp/e")" = 1 ] || { cat "$tmp/e"; echo "not one line"; exit 1; }
! grep -qi "MPI_ABORT" "$tmp/e" || { cat "$tmp/e"; echo "an error every rank saw aborted the job"; exit 1; }
# Truncated.
head -c 1000 "$tmp/good.hpml" >"$tmp/ck/checkpoint.hpml"
if $MPIRUN -np 2 "$HPML" train "${args[@]}" --checkpoint "$tmp/ck" --resume >"$tmp/o" 2>"$tmp/e"; then
    echo "truncated checkpoint accepted"; exit 1
fi
grep -q "truncated or corrupt" "$tmp/e" || { cat "$tmp/e"; exit 1; }
echo ok
