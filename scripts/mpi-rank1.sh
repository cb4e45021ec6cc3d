#!/bin/sh
# Used by scripts/mpi-check.sh for the worlds that must not hang (issue 38).
# mpi-rank1.sh BIN MODE ARGS...: rank 0 runs BIN ARGS; rank 1 per MODE:
# exit (exits 0 at once), help (BIN --help), or swap:OLD=NEW (BIN ARGS with
# the argument OLD replaced by NEW).
bin=$1; mode=$2; shift 2
if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
  case $mode in
    exit) exit 0 ;;
    help) exec "$bin" --help ;;
    swap:*)
      pair=${mode#swap:}; old=${pair%%=*}; new=${pair#*=}
      for a in "$@"; do
        shift
        if [ "$a" = "$old" ]; then set -- "$@" "$new"; else set -- "$@" "$a"; fi
      done ;;
  esac
fi
exec "$bin" "$@"
