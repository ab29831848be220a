# Hematite on the AMD Alveo U55C (xcu55c-fsvh2892-2L-e): the constraints of
# boards/u55c/hm_u55c_top.sv. boards/u55c/build.tcl reads this file after the IPs' own
# constraints (PROCESSING_ORDER LATE), so the clocks the IPs create exist here. The serial
# lanes of PCIe and QSFP0 are placed by the IPs (ip.tcl: the PCIe block X1Y0 with GTY quads
# 224-227; CMACE4_X0Y3 with the GT group X0Y24-X0Y27, bank 130).
#
# ./hematite test checks this file without Vivado (scripts/board_check.py): every port named
# here is a port of the top, every top-level port that is not a transceiver lane has a pin,
# and the reference clocks' periods agree with ip.tcl.

# ---- configuration
set_property CONFIG_VOLTAGE 1.8 [current_design]
set_property CFGBVS GND [current_design]
set_property BITSTREAM.GENERAL.COMPRESS TRUE [current_design]
set_property CONFIG_MODE SPIx4 [current_design]
set_property BITSTREAM.CONFIG.SPI_BUSWIDTH 4 [current_design]

# ---- reference clocks and pins
# PCIe reference clock from the slot, 100 MHz (MGTREFCLK0 of quad 227)
set_property PACKAGE_PIN AL15 [get_ports pcie_refclk_p]
set_property PACKAGE_PIN AL14 [get_ports pcie_refclk_n]
create_clock -period 10.000 -name pcie_refclk [get_ports pcie_refclk_p]

# PERST# from the slot
set_property -dict {PACKAGE_PIN BF41 IOSTANDARD LVCMOS18 PULLUP true} [get_ports pcie_perst_n]
set_false_path -from [get_ports pcie_perst_n]

# QSFP28 port 0 reference clock, 161.1328125 MHz (bank 130)
set_property PACKAGE_PIN AD42 [get_ports qsfp0_refclk_p]
set_property PACKAGE_PIN AD43 [get_ports qsfp0_refclk_n]
create_clock -period 6.206 -name qsfp0_refclk [get_ports qsfp0_refclk_p]

# the board's 100 MHz oscillator (the CMAC's init and DRP clock)
set_property -dict {PACKAGE_PIN BK10 IOSTANDARD LVDS} [get_ports sysclk_100_p]
set_property -dict {PACKAGE_PIN BL10 IOSTANDARD LVDS} [get_ports sysclk_100_n]
create_clock -period 10.000 -name sysclk_100 [get_ports sysclk_100_p]

# HBM CATTRIP to the board controller: held low (the HBM is not used)
set_property -dict {PACKAGE_PIN BE45 IOSTANDARD LVCMOS18 PULLDOWN true} [get_ports hbm_cattrip]
set_false_path -to [get_ports hbm_cattrip]

# QSFP0 LEDs
set_property -dict {PACKAGE_PIN BL13 IOSTANDARD LVCMOS18} [get_ports qsfp0_led_act]
set_property -dict {PACKAGE_PIN BK11 IOSTANDARD LVCMOS18} [get_ports qsfp0_led_link]
set_property -dict {PACKAGE_PIN BJ11 IOSTANDARD LVCMOS18} [get_ports qsfp0_led_fault]
set_false_path -to [get_ports {qsfp0_led_act qsfp0_led_link qsfp0_led_fault}]

# ---- the clocks the IPs create: the core clock (the PCIe block's user clock, 250 MHz) and the
# MAC clock (the CMAC's TX user clock, 322.265625 MHz)
set core_clk [get_clocks -of_objects [get_pins u_pcie/user_clk]]
set mac_clk  [get_clocks -of_objects [get_pins u_cmac/gt_txusrclk2]]
set init_clk [get_clocks sysclk_100]

# ---- clock-domain crossings (docs/fpga.md, "Clocks, resets and crossings")
# Between the core clock and the MAC clock every path is one of the shell's crossings: into
# the first stage of an hm_sync (ASYNC_REG), or the committed pointer a frame FIFO holds still
# for its reader. Each is bounded by the faster clock's period, data path only (the clocks are
# unrelated: no clock skew to account for).
set cdc_max [get_property PERIOD $mac_clk]
set_max_delay -datapath_only -from $core_clk -to $mac_clk $cdc_max
set_max_delay -datapath_only -from $mac_clk -to $core_clk $cdc_max

# Buses that cross together: the Gray-coded read pointer and counters of each frame FIFO, and
# its committed pointer (binary, held still while the reader takes it). Their bits must arrive
# within one period of the faster clock of each other.
foreach fifo [get_cells -hierarchical -filter {ORIG_REF_NAME == hm_axis_async_frame_fifo || REF_NAME == hm_axis_async_frame_fifo}] {
    set_bus_skew -from [get_cells "$fifo/rd_g_q_reg\[*\]"] -to [get_cells "$fifo/u_rd_sync/s_q_reg\[0\]*"] $cdc_max
    set_bus_skew -from [get_cells "$fifo/cnt_g_q_reg\[*\]"] -to [get_cells "$fifo/u_cnt_sync/s_q_reg\[0\]*"] $cdc_max
    set_bus_skew -from [get_cells "$fifo/com_x_q_reg\[*\]"] -to [get_cells "$fifo/com_m_q_reg\[*\]"] $cdc_max
}

# The 100 MHz clock reaches only the CMAC (its init and DRP clock, and its reset, which the
# CMAC synchronises itself)
set_clock_groups -asynchronous -group $init_clk -group [list $core_clk $mac_clk]
