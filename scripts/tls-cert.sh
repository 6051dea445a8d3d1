#!/usr/bin/env bash
# Makes a CA and one server certificate for Strata's TLS (docs/security.md):
#
#   scripts/tls-cert.sh --out DIR --host HOST [--host HOST...] [--name NAME] [--days N]
#
# DIR/ca.pem, DIR/ca.key: the CA (made once; later runs reuse it, so every
# node's certificate chains to the same CA). DIR/NAME.pem, DIR/NAME.key
# (NAME defaults to "server"): a certificate naming every HOST, an IP
# address or a DNS name, as clients will write it in the address they
# connect to. Keys are mode 0600, as stratad requires.
#
# For tests and small clusters; a site with its own PKI uses that instead.
set -euo pipefail

out="" name="server" days=825 hosts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --host) hosts+=("$2"); shift 2 ;;
    --name) name="$2"; shift 2 ;;
    --days) days="$2"; shift 2 ;;
    *) echo "usage: $0 --out DIR --host HOST [--host HOST...] [--name NAME] [--days N]" >&2
       exit 2 ;;
  esac
done
if [ -z "$out" ] || [ ${#hosts[@]} -eq 0 ]; then
  echo "usage: $0 --out DIR --host HOST [--host HOST...] [--name NAME] [--days N]" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "$0: needs the openssl command" >&2; exit 1; }

umask 077
mkdir -p "$out"
if [ ! -f "$out/ca.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$out/ca.key" -out "$out/ca.pem" -days "$days" \
    -subj "/CN=Strata test CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

san=""
for h in "${hosts[@]}"; do
  # An IPv4 or IPv6 literal is an IP entry; anything else a DNS name.
  if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then
    san+="${san:+,}IP:$h"
  else
    san+="${san:+,}DNS:$h"
  fi
done

openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$out/$name.key" -out "$out/$name.csr" -subj "/CN=${hosts[0]}" 2>/dev/null
printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' \
  "$san" > "$out/$name.ext"
openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
  -CAcreateserial -out "$out/$name.pem" -days "$days" -extfile "$out/$name.ext" 2>/dev/null
rm -f "$out/$name.csr" "$out/$name.ext"
chmod 600 "$out/$name.key" "$out/ca.key"
chmod 644 "$out/$name.pem" "$out/ca.pem"
echo "$out/ca.pem: the CA (node.tls_ca, STRATA_TLS_CA)"
echo "$out/$name.pem, $out/$name.key: node.tls_cert, node.tls_key ($san)"
