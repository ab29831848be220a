# Hematite's bitstream for the AMD Alveo U55C: Vivado's non-project flow.
#
#   ./hematite bitstream u55c        (writes build/u55c/sources.f, then runs this)
#   vivado -mode batch -source boards/u55c/build.tcl -tclargs <out dir> <sources.f>
#
# Written for Vivado 2023.2 (docs/fpga.md). Not run here: this machine has no Vivado. The
# suite sources it in tclsh with a stub for every Vivado command it calls
# (scripts/board_check.py), so a syntax error, an unknown command or a missing step fails there.
#
# <sources.f>: the RTL in compile order, one path per line, absolute or relative to the
# repository's root (scripts/manifest.py files vivado_u55c: hematite.core is the one list of
# sources).

if {[llength $argv] != 2} {
    error "usage: vivado -mode batch -source boards/u55c/build.tcl -tclargs OUT_DIR SOURCES_FILE"
}
lassign $argv out_dir sources_file
set board_dir [file dirname [file normalize [info script]]]
set root      [file dirname [file dirname $board_dir]]
set part      xcu55c-fsvh2892-2L-e
set top       hm_u55c_top
set ip_dir    [file join $out_dir ip]
file mkdir $out_dir $ip_dir

create_project -in_memory -part $part
set_property target_language Verilog [current_project]

# ---- the hard IPs
source [file join $board_dir ip.tcl]

# ---- the RTL (SystemVerilog; the CPU core is Verilog)
set fh [open $sources_file r]
set sources [split [string trim [read $fh]] "\n"]
close $fh
foreach f $sources {
    set p [file join $root $f]
    if {[file extension $f] eq ".v"} {
        read_verilog $p
    } else {
        read_verilog -sv $p
    }
}

# ---- constraints: pins and reference clocks (managed XDC); the crossings (unmanaged Tcl),
# after the IPs' own constraints, whose clocks they refer to
read_xdc [file join $board_dir u55c.xdc]
read_xdc -unmanaged [file join $board_dir cdc.tcl]
set_property PROCESSING_ORDER LATE [get_files [file join $board_dir cdc.tcl]]
# (implementation only: in synthesis the IPs are black boxes and their clocks do not exist yet)
set_property USED_IN_SYNTHESIS false [get_files [file join $board_dir cdc.tcl]]

# ---- synthesis, implementation, bitstream
synth_design -top $top -part $part
write_checkpoint -force [file join $out_dir post_synth.dcp]
report_utilization -file [file join $out_dir utilization_synth.rpt]
opt_design
place_design
phys_opt_design
route_design
write_checkpoint -force [file join $out_dir post_route.dcp]
report_utilization -file [file join $out_dir utilization.rpt]
report_timing_summary -file [file join $out_dir timing_summary.rpt]
report_cdc -file [file join $out_dir cdc.rpt]
report_clock_interaction -file [file join $out_dir clock_interaction.rpt]
write_bitstream -force [file join $out_dir hematite_u55c.bit]

# a design that misses timing is not a usable bitstream: say so, and fail
set wns [get_property SLACK [get_timing_paths -max_paths 1 -nworst 1 -setup]]
set whs [get_property SLACK [get_timing_paths -max_paths 1 -nworst 1 -hold]]
puts "hematite: U55C bitstream [file join $out_dir hematite_u55c.bit]: setup slack $wns ns, hold slack $whs ns"
if {$wns < 0 || $whs < 0} {
    error "hematite: timing not met (setup $wns ns, hold $whs ns): see [file join $out_dir timing_summary.rpt]"
}
