#!/usr/bin/env bash
# `memoryd token`: keygen (and rotation), mint with every flag, inspect with
# and without verification, and the usage errors operators will hit.
set -u

RUNFILES="${TEST_SRCDIR:?}/${TEST_WORKSPACE:?}"
M="$RUNFILES/service/memoryd"
T="${TEST_TMPDIR:?}"
PY=/usr/bin/python3
FAILS=0
CASE=""

fail() {
  echo "FAIL [$CASE]: $*" >&2
  echo "--- stdout ---" >&2; cat "$T/out" >&2
  echo "--- stderr ---" >&2; cat "$T/err" >&2
  FAILS=$((FAILS + 1))
}
run() {
  CASE=$1
  shift
  "$M" token "$@" >"$T/out" 2>"$T/err" </dev/null
  RC=$?
}
want_rc() { [ "$RC" = "$1" ] || fail "exit code $RC, want $1"; }
want_out() { grep -qF -- "$1" "$T/out" || fail "stdout lacks: $1"; }
want_err() { grep -qF -- "$1" "$T/err" || fail "stderr lacks: $1"; }
# jwks_kids FILE: the kids in a JWKS file, one per line.
jwks_kids() { "$PY" -c 'import json,sys; [print(k["kid"]) for k in json.load(open(sys.argv[1]))["keys"]]' "$1"; }

cd "$T" || exit 1

run "help" help
want_rc 0
want_out "usage: memoryd token"
run "no command"
want_rc 2

# ---- keygen ----
run "keygen" keygen --kid k1 --private k1.jwk --jwks jwks.json
want_rc 0
[ "$(stat -c %a k1.jwk)" = 600 ] || fail "private key mode $(stat -c %a k1.jwk), want 600"
grep -q '"d"' k1.jwk || fail "private JWK has no d"
grep -q '"d"' jwks.json && fail "the JWKS holds a private part"
[ "$(jwks_kids jwks.json)" = k1 ] || fail "kids: $(jwks_kids jwks.json)"

run "keygen refuses to overwrite" keygen --kid k9 --private k1.jwk --jwks jwks.json
want_rc 2
want_err "--force"

run "keygen rotation keeps the old key" keygen --kid k2 --private k2.jwk --jwks jwks.json
want_rc 0
[ "$(jwks_kids jwks.json | tr '\n' ' ')" = "k1 k2 " ] || fail "kids: $(jwks_kids jwks.json)"

run "keygen refuses a duplicate kid" keygen --kid k1 --private k3.jwk --jwks jwks.json
want_rc 2
want_err "already has a key with kid k1"

# ---- mint + inspect ----
run "mint" mint --key k2.jwk --sub agent-1 --tenant acme --scope "entries:read entries:write" \
  --ns 'planner:*:*' --ns 'shared:kb:*' --clr confidential --lvl internal --ttl 30m \
  --iss ops --jti tok-42
want_rc 0
TOKEN=$(cat "$T/out")
[ "$(printf '%s' "$TOKEN" | tr -cd . | wc -c)" = 2 ] || fail "not a compact JWS: $TOKEN"

run "inspect verifies with the JWKS" inspect "$TOKEN" --jwks jwks.json
want_rc 0
want_out "verification: OK"
want_out '"kid": "k2"'
want_out '"sub": "agent-1"'
want_out '"scope": "entries:read entries:write"'
want_out '"clr": "CONFIDENTIAL"'
want_out '"lvl": "INTERNAL"'
want_out '"jti": "tok-42"'
want_out '"shared:kb:*"'

run "inspect against other keys fails" keygen --kid other --private o.jwk --jwks other.json
run "inspect against other keys fails" inspect "$TOKEN" --jwks other.json
want_rc 1
want_out "JWT_EKID"

run "not yet valid" mint --key k1.jwk --sub a --tenant t --scope x --nbf-in 2h
NBF=$(cat "$T/out")
run "not yet valid" inspect "$NBF" --jwks jwks.json
want_rc 1
want_out "JWT_ENOTYET"

# ---- usage errors ----
run "bad label" mint --key k1.jwk --sub a --tenant t --scope x --clr TOPSECRET
want_rc 2
want_err "unknown label TOPSECRET"
run "bad ttl" mint --key k1.jwk --sub a --tenant t --scope x --ttl 5y
want_rc 2
want_err "--ttl"
run "lvl above clr" mint --key k1.jwk --sub a --tenant t --scope x --clr PUBLIC --lvl SECRET
want_rc 2
want_err "--lvl may not be above --clr"
run "missing tenant" mint --key k1.jwk --sub a --scope x
want_rc 2
want_err "--tenant"
chmod 644 k1.jwk
run "world-readable key refused" mint --key k1.jwk --sub a --tenant t --scope x
want_rc 2
want_err "chmod 600"

if [ "$FAILS" != 0 ]; then
  echo "$FAILS check(s) failed" >&2
  exit 1
fi
echo "all token CLI checks passed"
