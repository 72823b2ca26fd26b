#!/bin/bash
# Format (once) and mount the EBS data volume at $1: the first whole disk that is neither
# the root disk nor partitioned. Idempotent across reboots (label bbdata in /etc/fstab).
set -euo pipefail
target="$1"
device=""
for disk in $(lsblk -dnpo NAME,TYPE | awk '$2 == "disk" {print $1}'); do
  if lsblk -npo MOUNTPOINT "$disk" | grep -qx '/'; then continue; fi
  if [ "$(lsblk -npo NAME "$disk" | wc -l)" -gt 1 ]; then continue; fi
  device="$disk"
  break
done
if [ -z "$device" ]; then
  echo "brokerbench: no data volume found (lsblk: $(lsblk -dnpo NAME | tr '\n' ' '))" >&2
  exit 1
fi
blkid "$device" >/dev/null 2>&1 || mkfs.xfs -q -L bbdata "$device"
mkdir -p "$target"
grep -q '^LABEL=bbdata ' /etc/fstab || echo "LABEL=bbdata $target xfs defaults,noatime,nofail 0 2" >> /etc/fstab
mountpoint -q "$target" || mount "$target"
echo "brokerbench: data volume $device mounted at $target"
