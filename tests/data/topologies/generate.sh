#!/bin/bash
# Regenerates the hand-made recorded topologies (hwloc XML v2) of this folder:
#   bash generate.sh   (writes 2s-2numa-4gpu.xml, 2s-4numa-snc-2gpu.xml, 1s-1numa-igpu-dgpu.xml)
# vm-1numa-nogpu.xml is `lstopo --of xml` of a 2-core CI VM, not generated.
set -euo pipefail
cd "$(dirname "$0")"
# helpers: print hwloc v2 XML objects
hex() { printf "0x%08x" $1; }
mask() { # first count -> cpuset mask
  local first=$1 n=$2 m=0; for ((i=first;i<first+n;i++)); do m=$((m | (1<<i))); done; hex $m; }
ind() { printf "%*s" $1 ""; }
# core: indent, core os index, first PU, nodeset
core() {
  local in=$1 c=$2 pu=$3 ns=$4 cs; cs=$(mask $pu 2)
  echo "$(ind $in)<object type=\"L2Cache\" os_index=\"$c\" cpuset=\"$cs\" complete_cpuset=\"$cs\" nodeset=\"$ns\" complete_nodeset=\"$ns\" cache_size=\"1048576\" depth=\"2\" cache_linesize=\"64\" cache_associativity=\"16\" cache_type=\"0\">"
  echo "$(ind $((in+2)))<object type=\"L1Cache\" os_index=\"$c\" cpuset=\"$cs\" complete_cpuset=\"$cs\" nodeset=\"$ns\" complete_nodeset=\"$ns\" cache_size=\"49152\" depth=\"1\" cache_linesize=\"64\" cache_associativity=\"12\" cache_type=\"1\">"
  echo "$(ind $((in+4)))<object type=\"Core\" os_index=\"$c\" cpuset=\"$cs\" complete_cpuset=\"$cs\" nodeset=\"$ns\" complete_nodeset=\"$ns\">"
  for ((k=0;k<2;k++)); do local p=$((pu+k)); local pm; pm=$(mask $p 1)
    echo "$(ind $((in+6)))<object type=\"PU\" os_index=\"$p\" cpuset=\"$pm\" complete_cpuset=\"$pm\" nodeset=\"$ns\" complete_nodeset=\"$ns\"/>"; done
  echo "$(ind $((in+4)))</object>"; echo "$(ind $((in+2)))</object>"; echo "$(ind $in)</object>"
}
numa() { # indent os_index bytes cpuset
  local ns; ns=$(hex $((1<<$2)))
  echo "$(ind $1)<object type=\"NUMANode\" os_index=\"$2\" cpuset=\"$4\" complete_cpuset=\"$4\" nodeset=\"$ns\" complete_nodeset=\"$ns\" local_memory=\"$3\">"
  echo "$(ind $(($1+2)))<page_type size=\"4096\" count=\"$(($3/4096))\"/>"
  echo "$(ind $(($1+2)))<page_type size=\"2097152\" count=\"0\"/>"
  echo "$(ind $1)</object>"
}
# hostbridge with one root port and one device: indent bus_lo bus_hi port_busid dev_busid pci_type osdev_name osdev_type
gpu_branch() {
  local in=$1 lo=$2 hi=$3 port=$4 dev=$5 type=$6 osname=$7 ostype=$8
  echo "$(ind $in)<object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[$lo-$hi]\">"
  echo "$(ind $((in+2)))<object type=\"Bridge\" pci_busid=\"$port\" pci_type=\"0604 [8086:352a] [8086:0000] 04\" pci_link_speed=\"31.507692\" bridge_type=\"1-1\" depth=\"1\" bridge_pci=\"0000:[$hi-$hi]\">"
  echo "$(ind $((in+4)))<object type=\"PCIDev\" pci_busid=\"$dev\" pci_type=\"$type\" pci_link_speed=\"31.507692\">"
  echo "$(ind $((in+6)))<object type=\"OSDev\" name=\"$osname\" osdev_type=\"$ostype\"/>"
  echo "$(ind $((in+4)))</object>"; echo "$(ind $((in+2)))</object>"; echo "$(ind $in)</object>"
}
A100='0302 [10de:20b0] [10de:134f] a1'
MI='0380 [1002:740c] [1002:0b0c] 01'
NIC='0200 [15b3:1017] [15b3:0020] 00'
VGA='0300 [1a03:2000] [15d9:1b95] 52'
header() {
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo '<!DOCTYPE topology SYSTEM "hwloc2.dtd">'
  echo '<topology version="2.0">'
}

two_socket() {
  G=137438953472  # 128 GiB per node
  all=$(mask 0 16)
  header
  echo "  <object type=\"Machine\" os_index=\"0\" cpuset=\"$all\" complete_cpuset=\"$all\" allowed_cpuset=\"$all\" nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" allowed_nodeset=\"0x00000003\">"
  echo '    <info name="DMIProductName" value="Two-socket GPU server (recorded for Loom tests)"/>'
  echo '    <info name="Backend" value="Linux"/>'
  echo '    <info name="OSName" value="Linux"/>'
  echo '    <info name="Architecture" value="x86_64"/>'
  echo '    <info name="hwlocVersion" value="2.9.0"/>'
  for p in 0 1; do
    cs=$(mask $((p*8)) 8); ns=$(hex $((1<<p)))
    echo "    <object type=\"Package\" os_index=\"$p\" cpuset=\"$cs\" complete_cpuset=\"$cs\" nodeset=\"$ns\" complete_nodeset=\"$ns\">"
    echo '      <info name="CPUVendor" value="GenuineIntel"/>'
    echo '      <info name="CPUFamilyNumber" value="6"/>'
    echo '      <info name="CPUModelNumber" value="143"/>'
    echo '      <info name="CPUModel" value="Intel(R) Xeon(R) Platinum 8468"/>'
    numa 6 $p $G $cs
    echo "      <object type=\"L3Cache\" os_index=\"$p\" cpuset=\"$cs\" complete_cpuset=\"$cs\" nodeset=\"$ns\" complete_nodeset=\"$ns\" cache_size=\"110100480\" depth=\"3\" cache_linesize=\"64\" cache_associativity=\"15\" cache_type=\"0\">"
    for c in 0 1 2 3; do core 8 $((p*4+c)) $((p*8+c*2)) $ns; done
    echo "      </object>"
    if [ $p = 0 ]; then
      gpu_branch 6 16 17 0000:16:01.0 0000:17:00.0 "$NIC" mlx5_0 3
      gpu_branch 6 18 19 0000:18:01.0 0000:19:00.0 "$A100" card1 1
      gpu_branch 6 3a 3b 0000:3a:01.0 0000:3b:00.0 "$A100" card2 1
    else
      gpu_branch 6 86 87 0000:86:01.0 0000:87:00.0 "$A100" card3 1
      gpu_branch 6 ae af 0000:ae:01.0 0000:af:00.0 "$A100" card4 1
    fi
    echo "    </object>"
  done
  # The BMC's display sits under the machine: local to no NUMA node in particular.
  echo '    <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[00-03]">'
  echo '      <object type="Bridge" pci_busid="0000:00:1c.0" pci_type="0604 [8086:1bb8] [0000:0000] 11" bridge_type="1-1" depth="1" bridge_pci="0000:[02-03]">'
  echo "        <object type=\"PCIDev\" pci_busid=\"0000:03:00.0\" pci_type=\"$VGA\" pci_link_speed=\"0.250000\"/>"
  echo '      </object>'
  echo '    </object>'
  echo '  </object>'
  echo '</topology>'
}
two_socket_snc() {
  G=68719476736  # 64 GiB per node
  all=$(mask 0 16)
  header
  echo "  <object type=\"Machine\" os_index=\"0\" cpuset=\"$all\" complete_cpuset=\"$all\" allowed_cpuset=\"$all\" nodeset=\"0x0000000f\" complete_nodeset=\"0x0000000f\" allowed_nodeset=\"0x0000000f\">"
  echo '    <info name="DMIProductName" value="Two-socket server in sub-NUMA clustering mode (recorded for Loom tests)"/>'
  echo '    <info name="Backend" value="Linux"/>'
  echo '    <info name="OSName" value="Linux"/>'
  echo '    <info name="Architecture" value="x86_64"/>'
  echo '    <info name="hwlocVersion" value="2.9.0"/>'
  for p in 0 1; do
    cs=$(mask $((p*8)) 8); ns=$(hex $((3<<(p*2))))
    echo "    <object type=\"Package\" os_index=\"$p\" cpuset=\"$cs\" complete_cpuset=\"$cs\" nodeset=\"$ns\" complete_nodeset=\"$ns\">"
    echo '      <info name="CPUVendor" value="GenuineIntel"/>'
    echo '      <info name="CPUModel" value="Intel(R) Xeon(R) Gold 6338"/>'
    echo "      <object type=\"L3Cache\" os_index=\"$p\" cpuset=\"$cs\" complete_cpuset=\"$cs\" nodeset=\"$ns\" complete_nodeset=\"$ns\" cache_size=\"50331648\" depth=\"3\" cache_linesize=\"64\" cache_associativity=\"12\" cache_type=\"0\">"
    for d in 0 1; do
      n=$((p*2+d)); dcs=$(mask $((p*8+d*4)) 4); dns=$(hex $((1<<n)))
      echo "        <object type=\"Group\" os_index=\"$n\" cpuset=\"$dcs\" complete_cpuset=\"$dcs\" nodeset=\"$dns\" complete_nodeset=\"$dns\" kind=\"1000\" subkind=\"0\">"
      numa 10 $n $G $dcs
      for c in 0 1; do core 10 $((p*4+d*2+c)) $((p*8+d*4+c*2)) $dns; done
      if [ $n = 0 ]; then gpu_branch 10 18 19 0000:18:01.0 0000:19:00.0 "$A100" card1 1; fi
      if [ $n = 3 ]; then gpu_branch 10 ae af 0000:ae:01.0 0000:af:00.0 "$MI" card2 1; fi
      echo "        </object>"
    done
    echo "      </object>"
    # A NIC local to the whole package (both of its NUMA nodes).
    if [ $p = 0 ]; then gpu_branch 6 30 31 0000:30:01.0 0000:31:00.0 "$NIC" mlx5_0 3; fi
    echo "    </object>"
  done
  echo '  </object>'
  echo '</topology>'
}
workstation() {
  G=34359738368  # 32 GiB
  all=$(mask 0 8)
  header
  echo "  <object type=\"Machine\" os_index=\"0\" cpuset=\"$all\" complete_cpuset=\"$all\" allowed_cpuset=\"$all\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\">"
  echo '    <info name="DMIProductName" value="Workstation with an integrated and a discrete GPU (recorded for Loom tests)"/>'
  echo '    <info name="Backend" value="Linux"/>'
  echo '    <info name="OSName" value="Linux"/>'
  echo '    <info name="Architecture" value="x86_64"/>'
  echo '    <info name="hwlocVersion" value="2.9.0"/>'
  echo "    <object type=\"Package\" os_index=\"0\" cpuset=\"$all\" complete_cpuset=\"$all\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\">"
  echo '      <info name="CPUVendor" value="GenuineIntel"/>'
  echo '      <info name="CPUModel" value="13th Gen Intel(R) Core(TM) i7-13700"/>'
  numa 6 0 $G $all
  echo "      <object type=\"L3Cache\" os_index=\"0\" cpuset=\"$all\" complete_cpuset=\"$all\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" cache_size=\"31457280\" depth=\"3\" cache_linesize=\"64\" cache_associativity=\"12\" cache_type=\"0\">"
  for c in 0 1 2 3; do core 8 $c $((c*2)) 0x00000001; done
  echo "      </object>"
  echo '      <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[00-01]">'
  echo '        <object type="PCIDev" pci_busid="0000:00:02.0" pci_type="0300 [8086:a780] [1043:8882] 04" pci_link_speed="0.000000">'
  echo '          <object type="OSDev" name="card0" osdev_type="1"/>'
  echo '        </object>'
  echo '        <object type="Bridge" pci_busid="0000:00:01.0" pci_type="0604 [8086:a70d] [0000:0000] 01" pci_link_speed="31.507692" bridge_type="1-1" depth="1" bridge_pci="0000:[01-01]">'
  echo '          <object type="PCIDev" pci_busid="0000:01:00.0" pci_type="0300 [10de:2684] [10de:16f3] a1" pci_link_speed="31.507692">'
  echo '            <object type="OSDev" name="card1" osdev_type="1"/>'
  echo '          </object>'
  echo '        </object>'
  echo '      </object>'
  echo '    </object>'
  echo '  </object>'
  echo '</topology>'
}
two_socket > 2s-2numa-4gpu.xml
two_socket_snc > 2s-4numa-snc-2gpu.xml
workstation > 1s-1numa-igpu-dgpu.xml
