# Stubs of the Vivado commands that boards/<card>/build.tcl, ip.tcl and the XDC call, for
# sourcing them in a plain tclsh (scripts/board_check.py). Each stub checks the options it is
# given against the ones the flow may use and records the call in the log; any other command
# is an error (`unknown`). What they return stands for Vivado's objects: names as strings.
#
# usage (board_check.py writes the driver): set ::stub_log <file>; source this; then source the
# flow or the XDC.

set ::stub_fh [open $::stub_log w]

proc stub_log {args} {
    puts $::stub_fh [list {*}$args]
}

# Options a stub accepts: "-name value" options in $valued, flags in $flags; anything else
# starting with "-" is refused. Returns the remaining positional arguments.
proc stub_opts {cmd argl valued flags} {
    set pos {}
    set i 0
    while {$i < [llength $argl]} {
        set a [lindex $argl $i]
        if {[string match -* $a] && ![string is double -strict $a]} {
            if {$a in $valued} {
                incr i
                if {$i >= [llength $argl]} { error "$cmd: option $a needs a value" }
            } elseif {$a ni $flags} {
                error "$cmd: option $a is not one the flow may use (scripts/vivado_stub.tcl)"
            }
        } else {
            lappend pos $a
        }
        incr i
    }
    return $pos
}

proc unknown {args} {
    error "not a stubbed Vivado command: [lindex $args 0] (scripts/vivado_stub.tcl lists what the flow may call)"
}

# ---- project and IP
proc create_project {args} { stub_opts create_project $args {-part} {-in_memory -force}; stub_log create_project {*}$args }
proc current_project {args} { stub_opts current_project $args {} {}; return project }
proc current_design {args} { stub_opts current_design $args {} {}; return design }
proc create_ip {args} {
    stub_opts create_ip $args {-name -vendor -library -module_name -dir -version} {}
    set d [dict create {*}$args]
    set ::ip_def([dict get $d -module_name]) [dict get $d -name]
    stub_log create_ip [dict get $d -module_name] [dict get $d -name]
}
proc get_ips {args} {
    set pos [stub_opts get_ips $args {} {-quiet}]
    foreach n $pos { if {![info exists ::ip_def($n)]} { error "get_ips: no IP $n was created" } }
    return [list ip {*}$pos]
}
proc generate_target {args} { stub_opts generate_target $args {} {-force}; stub_log generate_target {*}$args }
proc synth_ip {args} { stub_opts synth_ip $args {} {-force}; stub_log synth_ip {*}$args }
proc get_files {args} { return [list file {*}[stub_opts get_files $args {} {-quiet}]] }

# set_property NAME VALUE OBJECTS | set_property -dict {NAME VALUE ...} OBJECTS
proc set_property {args} {
    set pos [stub_opts set_property $args {-dict} {-quiet}]
    if {[lindex $args 0] eq "-dict"} {
        set kv [lindex $args 1]
        set obj [lindex $args 2]
        if {[llength $kv] % 2} { error "set_property -dict: odd list" }
    } else {
        if {[llength $pos] != 3} { error "set_property: expected NAME VALUE OBJECTS, got $args" }
        lassign $pos k v obj
        set kv [list $k $v]
    }
    foreach {k v} $kv {
        if {[lindex $obj 0] eq "ip"} {
            foreach n [lrange $obj 1 end] { stub_log ip_cfg $n $k $v }
        } else {
            stub_log set_property $k $v $obj
        }
    }
}
proc get_property {args} {
    set pos [stub_opts get_property $args {} {-quiet}]
    lassign $pos name obj
    switch -- $name {
        SLACK  { return 0.1 }
        PERIOD {
            # (the clocks the IPs create, by the pin they are taken from, and ours)
            set periods {u_pcie/user_clk 4.0 u_cmac/gt_txusrclk2 3.103}
            if {[lindex $obj 0] ne "clock"} { error "get_property PERIOD: not a clock: $obj" }
            set c [lindex $obj 1]
            if {[dict exists $periods $c]} { return [dict get $periods $c] }
            if {[info exists ::clocks($c)]} { return $::clocks($c) }
            error "get_property PERIOD: no clock $c"
        }
        default { error "get_property: $name is not stubbed" }
    }
}

# ---- sources, synthesis, implementation, reports
proc read_verilog {args} {
    set pos [stub_opts read_verilog $args {-library} {-sv}]
    foreach f $pos { if {![file exists $f]} { error "read_verilog: no file $f" } }
    stub_log read_verilog {*}$pos
}
proc read_xdc {args} {
    set pos [stub_opts read_xdc $args {} {-unmanaged}]
    foreach f $pos { if {![file exists $f]} { error "read_xdc: no file $f" } }
    stub_log read_xdc {*}$args
}
proc synth_design {args} {
    stub_opts synth_design $args {-top -part -directive -flatten_hierarchy} {}
    stub_log synth_design {*}$args
}
foreach cmd {opt_design place_design phys_opt_design route_design} {
    proc $cmd {args} "stub_opts $cmd \$args {-directive} {}; stub_log $cmd {*}\$args"
}
proc write_checkpoint {args} { stub_opts write_checkpoint $args {} {-force}; stub_log write_checkpoint {*}$args }
proc write_bitstream {args} { stub_opts write_bitstream $args {} {-force}; stub_log write_bitstream {*}$args }
foreach cmd {report_utilization report_timing_summary report_cdc report_clock_interaction} {
    proc $cmd {args} "stub_opts $cmd \$args {-file} {}; stub_log $cmd {*}\$args"
}
proc get_timing_paths {args} {
    stub_opts get_timing_paths $args {-max_paths -nworst} {-setup -hold}
    return path
}

# ---- constraints (the XDC)
proc get_ports {args} {
    set pos [stub_opts get_ports $args {} {}]
    set out {}
    foreach p [join $pos] { stub_log get_ports $p; lappend out $p }
    return [list port {*}$out]
}
proc get_pins {args} {
    set pos [stub_opts get_pins $args {-filter -of_objects} {-hierarchical}]
    stub_log get_pins {*}$pos
    return [list pin {*}$pos]
}
# (a search by -filter stands for the two frame FIFOs of the Ethernet port; a name or pattern
# is logged, and board_check.py checks it against the RTL)
proc get_cells {args} {
    set pos [stub_opts get_cells $args {-filter} {-hierarchical -quiet}]
    if {$pos eq {}} {
        stub_log get_cells_filter [lindex $args [expr {[lsearch -exact $args -filter] + 1}]]
        return [list u_card/u_eth/u_rx u_card/u_eth/u_tx]
    }
    foreach p $pos { stub_log get_cells $p }
    # (Vivado trims the transmit FIFO's counter crossing: nobody reads those counters)
    if {"-quiet" in $args && ([string match {*/u_tx/cnt_g_q_reg*} $pos] || [string match {*/u_tx/u_cnt_sync/*} $pos])} {
        return {}
    }
    return $pos
}
proc get_clocks {args} {
    set pos [stub_opts get_clocks $args {-of_objects} {}]
    set d [dict create {*}[lrange $args 0 end-[llength $pos]]]
    if {[dict exists $d -of_objects]} {
        set o [dict get $d -of_objects]
        stub_log get_clocks_of $o
        return [list clock [lindex $o end]]
    }
    foreach c $pos { if {![info exists ::clocks($c)]} { error "get_clocks: no clock $c was created" } }
    return [list clock {*}$pos]
}
proc create_clock {args} {
    stub_opts create_clock $args {-period -name -waveform} {}
    set d [dict create {*}[lrange $args 0 end-1]]
    set ::clocks([dict get $d -name]) [dict get $d -period]
    stub_log create_clock [dict get $d -name] [dict get $d -period] [lindex $args end]
}
proc set_false_path {args} { stub_opts set_false_path $args {-from -to -through} {}; stub_log set_false_path {*}$args }
proc set_max_delay {args} {
    set pos [stub_opts set_max_delay $args {-from -to -through} {-datapath_only}]
    if {[llength $pos] != 1 || ![string is double -strict [lindex $pos 0]]} { error "set_max_delay: no delay value" }
    stub_log set_max_delay {*}$args
}
proc set_bus_skew {args} {
    set pos [stub_opts set_bus_skew $args {-from -to} {}]
    if {[llength $pos] != 1 || ![string is double -strict [lindex $pos 0]]} { error "set_bus_skew: no skew value" }
    stub_log set_bus_skew {*}$args
}
proc set_clock_groups {args} { stub_opts set_clock_groups $args {-group -name} {-asynchronous -physically_exclusive}; stub_log set_clock_groups {*}$args }
