# kop.jq: helpers every reconcile program may `include "kop";` (jq 1.6).
#
# Directives: jq 1.6 cannot call C, so these return {"$fn": NAME, "arg": .}
# objects that ireconcile resolves (lib/render.c, innermost first) before it
# compares the desired object with the live one. They compose:
#   $config | yaml | base64enc     Secret data holding the YAML text
#   $config | yaml | md5           checksum annotation of the same bytes
def yaml: {"$fn": "yaml", "arg": .};
def md5: {"$fn": "md5", "arg": .};
def sha256: {"$fn": "sha256", "arg": .};
def base64enc: {"$fn": "base64", "arg": .};

# Is this value an unresolved directive?
def kop_is_fn: type == "object" and has("$fn") and has("arg") and length == 2;

# A Kubernetes DNS-1123 label (namespace names): at most 63 characters,
# lowercase alphanumerics and '-', alphanumeric at both ends.
# (no regex: jq 1.6 compiles one on every call)
def kop_dns1123_label:
  type == "string" and length >= 1 and length <= 63
  and (explode | (.[0] != 45 and .[-1] != 45 and all((. >= 97 and . <= 122) or (. >= 48 and . <= 57) or . == 45)));

# ---- resource.Quantity, canonicalised as apimachinery does ----
#
# kop_quantity: string -> canonical string ("0.5" -> "500m", "1024Mi" ->
# "1Gi", "2000" -> "2k", "1e3" -> "1e3"), or null when the text is not a
# quantity. Values whose exact integer form needs more than 53 bits cannot be
# handled with jq's doubles and are returned as given.

def _kop_pow($b; $e): reduce range(0; $e) as $i (1; . * $b);

# [amount, times]: amount with every factor $f removed, and how many.
def _kop_remove_factors($f):
  if . == 0 then [0, 0]
  else [., 0] | until((.[0] % $f) != 0; [(.[0] / $f), .[1] + 1])
  end;

def _kop_dec_suffix($e):
  {"-9": "n", "-6": "u", "-3": "m", "0": "", "3": "k", "6": "M", "9": "G", "12": "T", "15": "P", "18": "E"}[$e | tostring];

# [sign, int, frac, suffix] of a quantity's text, or null: the grammar
# [+-]?[0-9]*(\.[0-9]*)?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?
# with at least one digit, read without a regex (jq 1.6 compiles one per
# call, and a render reads dozens of quantities).
def _kop_digits_end($c; $i): first(range($i; $c | length) | select($c[.] < 48 or $c[.] > 57)) // ($c | length);
def _kop_qparse:
  explode as $c
  | (if ($c | length) > 0 and ($c[0] == 43 or $c[0] == 45) then 1 else 0 end) as $i0
  | _kop_digits_end($c; $i0) as $i1
  | (if $c[$i1] == 46 then _kop_digits_end($c; $i1 + 1) else $i1 end) as $i2
  | ($c[$i2:] | implode) as $suffix
  | if ($i2 - $i0) - (if $c[$i1] == 46 then 1 else 0 end) == 0 then null
    elif ($suffix == "" or ({"Ki": 1, "Mi": 1, "Gi": 1, "Ti": 1, "Pi": 1, "Ei": 1, "n": 1, "u": 1, "m": 1, "k": 1,
                              "M": 1, "G": 1, "T": 1, "P": 1, "E": 1}[$suffix] // false)
          or (($c[$i2] == 101 or $c[$i2] == 69)
              and (($c[$i2 + 1:] | if length > 0 and (.[0] == 43 or .[0] == 45) then .[1:] else . end) as $e
                   | ($e | length) > 0 and ($e | all(. >= 48 and . <= 57))))) then
      [($c[0:$i0] | implode), ($c[$i0:$i1] | implode),
       (if $c[$i1] == 46 then $c[$i1 + 1:$i2] | implode else null end), $suffix]
    else null end;

# Already canonical, the most common case ("500m", "2", "1536Mi"): an integer
# of at most 15 digits without a leading zero and a suffix it could not move
# up to (not a multiple of 1000, or 1024 with a binary suffix).
def _kop_quantity_canonical:
  _kop_qparse as $m
  | $m != null and $m[0] == "" and $m[2] == null and ($m[1] | length) <= 15
    and ($m[1] | startswith("0") | not)
    and ($m[1] | tonumber) as $n
        | ({"": 1000, "m": 1000, "k": 1000, "M": 1000, "G": 1000, "T": 1000, "P": 1000,
            "Ki": 1024, "Mi": 1024, "Gi": 1024, "Ti": 1024, "Pi": 1024}[$m[3]]) as $f
        | $f != null and ($n % $f) != 0
          # "512" stays decimal, but 512Ki is 524288: binary from 1024 up
          and ($f == 1000 or $m[3] != "" );

# The number a string is the text of, as tostring writes an integer (no
# leading zero, no "+", no exponent); null when it is not.
def kop_int_text:
  (try tonumber catch null) as $n
  | if $n != null and $n == ($n | floor) and ($n | tostring) == . then $n else null end;

# The same answer for the commonest texts, cheaper: digits (a plain integer
# from 1, no sign, no leading zero, under 10^15) and a suffix of the table
# above; false when unsure (then _kop_quantity_canonical decides).
def _kop_quantity_fast:
  (if endswith("i") then .[-2:] elif ({"m": 1, "k": 1, "M": 1, "G": 1, "T": 1, "P": 1}[.[-1:]] // false) then .[-1:]
   else "" end) as $sfx
  | ({"": 1000, "m": 1000, "k": 1000, "M": 1000, "G": 1000, "T": 1000, "P": 1000,
      "Ki": 1024, "Mi": 1024, "Gi": 1024, "Ti": 1024, "Pi": 1024}[$sfx]) as $f
  | $f != null
    and (.[:length - ($sfx | length)]) as $d
        | ($d | kop_int_text) as $n
        | $n != null and $n >= 1 and $n < 1e15 and ($n % $f) != 0 and ($f == 1000 or $sfx != "");

def kop_quantity:
  if type != "string" then null
  elif _kop_quantity_fast or _kop_quantity_canonical then .
  else
    (_kop_qparse | if . then {sign: .[0], int: .[1], frac: .[2], suffix: .[3]} else null end) as $m
    | if $m == null then null
      else
        ($m.frac // "") as $frac
        | (($m.int + $frac) | explode | (first(range(0; length) as $k | select(.[$k] != 48) | $k) // length) as $z
           | .[$z:] | implode) as $digits
        | ($m.suffix // "") as $suffix
        | (if $suffix != "Ei" and ($suffix | length) > 1 and ($suffix | startswith("e") or startswith("E")) then "exp"
           elif ($suffix | endswith("i")) then "bin" else "dec" end) as $format
        | (if $format == "exp" then ($suffix[1:] | tonumber)
           elif $format == "dec" then ({"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}[$suffix])
           else 0 end) as $e10s
        | (if $format == "bin" then ({"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}[$suffix]) else 0 end) as $k
        | if $digits == "" then "0"
          elif ($digits | length) > 15 then .
          else
            # value = mantissa * 10^scale, mantissa an integer
            ($digits | tonumber) as $mant0
            | ($e10s - ($frac | length)) as $scale0
            | ($mant0 * _kop_pow(1024; $k)) as $mant1
            | if $mant1 >= 9007199254740992 then .
              else
                # round up to nano precision, as apimachinery does
                (if $scale0 < -9 then
                   [((($mant1 / _kop_pow(10; -9 - $scale0)) | ceil)), -9]
                 else [$mant1, $scale0] end) as [$mant, $scale]
                | (if $format == "bin" then
                     (if $scale >= 0 then ($mant * _kop_pow(10; $scale))
                      elif ($mant % _kop_pow(10; -$scale)) == 0 then ($mant / _kop_pow(10; -$scale))
                      else null end) as $int
                     | if $int != null and $int >= 1024 and $int < 9007199254740992 then "bin" else "dec" end
                   else $format end) as $out
                | if $out == "bin" then
                    ($mant * _kop_pow(10; ([$scale, 0] | max)) / _kop_pow(10; ([-$scale, 0] | max))) as $int
                    | ($int | _kop_remove_factors(1024)) as [$amount, $times]
                    | ($m.sign | if . == "-" then "-" else "" end) + ($amount | tostring)
                      + (["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][$times])
                  else
                    ($mant | _kop_remove_factors(10)) as [$a0, $t]
                    | ($scale + $t) as $e0
                    | (if ($e0 % 3 + 3) % 3 == 1 then [$a0 * 10, $e0 - 1]
                       elif ($e0 % 3 + 3) % 3 == 2 then [$a0 * 100, $e0 - 2]
                       else [$a0, $e0] end) as [$amount, $exp]
                    | if $amount >= 9007199254740992 then .
                      else
                        ($m.sign | if . == "-" then "-" else "" end) + ($amount | tostring)
                        + (if $out == "exp" then (if $exp == 0 then "" else "e\($exp)" end)
                           else (_kop_dec_suffix($exp) // "e\($exp)") end)
                      end
                  end
              end
          end
      end
  end;

# ---- metav1.Condition lists ----
#
# kop_condition($old; $type; $status; $reason; $message; $gen; $now): the
# condition, keeping lastTransitionTime from $old (a conditions array) when
# its status did not change.
def kop_condition($old; $type; $status; $reason; $message; $gen; $now):
  (($old // []) | map(select(.type == $type)) | first // null) as $prev
  | {type: $type, status: $status, observedGeneration: $gen,
     lastTransitionTime: (if $prev != null and $prev.status == $status and ($prev.lastTransitionTime // null) != null
                          then $prev.lastTransitionTime else $now end),
     reason: $reason, message: $message};

# Seconds since the epoch of an RFC 3339 time ("2026-01-02T03:04:05Z", with
# or without a fraction); null when it cannot be read.
# (no regex: jq 1.6 compiles one on every call, and this runs on every reconcile)
def kop_epoch:
  if type == "string" and length >= 20 and endswith("Z") and (length == 20 or (length > 21 and .[19:20] == "."))
     and (.[20:-1] | explode | all(. >= 48 and . <= 57)) then
    .[0:19] + "Z" | try fromdateiso8601 catch null
  else null end;
