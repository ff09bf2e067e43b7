#!/usr/bin/env bash
# A committed migration never changes (a database that ran its old text would silently differ):
# fails when any commit of main (the first-parent line, so a branch may reshape its own new
# migrations before it is merged) edits, deletes or renames a file under migrations/ that main
# already had. Five commits are listed by hash: the two that edited 0006 and 0007 before this rule
# existed (migration 0013 repairs what their first versions left behind:
# test/integration/migration-history.test.ts), two that renumbered migrations of the same stop,
# new on main since the last landed commit, before any database outside the tests ran them (the
# last one, the merge of the Citus work, moved the repair from 0011 to 0013 behind Citus's 0011 and
# 0012), and, on the same grounds, the merge of a review that rewrote 0021 of its own stop (it
# changes assert_state_size() instead of replacing the two append functions). Run from the
# repository root; in a shallow clone only the last commit can be checked against its parent.
set -euo pipefail
REPAIRED_EDITS="16c77eedc82676ec707830f7a0accef2550ea7f3 864353f0dc4abb39540fb91e8d58f27409f92943 576cc8b10e2a1ea4209ea201cde9aa226cb16843 9df67a1d71cc5bcfe20f2d38f445398e5096573f dd3fbb39c6ba922c364151eb8fad2319cde86cd7"

if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  echo "shallow clone: checking the last commit against its parent only"
  commits=$(git rev-parse HEAD)
else
  commits=$(git log --first-parent --format=%H -- migrations/)
fi
status=0
for commit in $commits; do
  case " $REPAIRED_EDITS " in *" $commit "*) continue ;; esac
  git rev-parse -q --verify "$commit^1" >/dev/null || continue
  changed=$(git diff --no-renames --name-status --diff-filter=MDT "$commit^1" "$commit" -- migrations/)
  if [ -n "$changed" ]; then
    echo "commit $(git log -1 --format='%h %s' "$commit" | cut -c1-100) changed committed migrations:"
    echo "$changed" | sed 's/^/  /'
    status=1
  fi
done
[ $status -eq 0 ] && echo "migrations: no committed migration changed"
exit $status
