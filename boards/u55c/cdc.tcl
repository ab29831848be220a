# Hematite on the AMD Alveo U55C: the clock-domain crossings between the core clock and the MAC
# clock (docs/fpga.md, "Clocks, resets and crossings"). Unmanaged Tcl (build.tcl: read_xdc
# -unmanaged, PROCESSING_ORDER LATE): it queries the clocks the IPs create and loops over the
# frame FIFOs, which a managed XDC may not. scripts/board_check.py checks every instance,
# register and pin named here against the RTL.

# The core clock (the PCIe block's user clock, 250 MHz) and the MAC clock (the CMAC's TX user
# clock, 322.265625 MHz), as the IPs' own constraints create them.
set core_clk [get_clocks -of_objects [get_pins u_pcie/user_clk]]
set mac_clk  [get_clocks -of_objects [get_pins u_cmac/gt_txusrclk2]]
set init_clk [get_clocks sysclk_100]

# Between the core clock and the MAC clock every path is one of the shell's crossings: into
# the first stage of an hm_sync (ASYNC_REG), or the committed pointer a frame FIFO holds still
# for its reader. Each is bounded by the faster clock's period, data path only (the clocks are
# unrelated: no clock skew to account for).
set cdc_max [expr {min([get_property PERIOD $core_clk], [get_property PERIOD $mac_clk])}]
set_max_delay -datapath_only -from $core_clk -to $mac_clk $cdc_max
set_max_delay -datapath_only -from $mac_clk -to $core_clk $cdc_max

# Buses that cross together: each frame FIFO's Gray-coded read pointer and counters, and its
# committed pointer (binary, held still while the reader takes it). Their bits must arrive
# within one period of the faster clock of each other. The transmit FIFO's counters are read by
# nobody, so its counter crossing is trimmed away and skipped; any other name that matches
# nothing is an error (a constraint silently lost would leave a crossing unchecked).
foreach fifo [get_cells -hierarchical -filter {ORIG_REF_NAME == hm_axis_async_frame_fifo || REF_NAME == hm_axis_async_frame_fifo}] {
    # (source registers, first synchroniser stage or capturing register; in braces, so the
    # brackets stay brackets)
    foreach {from to} {
        {rd_g_q_reg[*]}  {u_rd_sync/s_q_reg[0][*]}
        {cnt_g_q_reg[*]} {u_cnt_sync/s_q_reg[0][*]}
        {com_x_q_reg[*]} {com_m_q_reg[*]}
    } {
        set src [get_cells -quiet "$fifo/$from"]
        set dst [get_cells -quiet "$fifo/$to"]
        if {[llength $src] && [llength $dst]} {
            set_bus_skew -from $src -to $dst $cdc_max
        } elseif {![string match {*/u_tx} $fifo] || ![string match {cnt_g_q_reg*} $from]} {
            error "cdc.tcl: no cells $fifo/$from or $fifo/$to: the crossing would go unconstrained"
        }
    }
}

# The 100 MHz clock reaches only the CMAC (its init and DRP clock, and its reset, which the
# CMAC synchronises itself)
set_clock_groups -asynchronous -group $init_clk -group [list $core_clk $mac_clk]
