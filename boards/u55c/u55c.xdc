# Hematite on the AMD Alveo U55C (xcu55c-fsvh2892-2L-e): the constraints of
# boards/u55c/hm_u55c_top.sv: configuration, pins, I/O standards and the reference clocks. A
# managed XDC takes plain commands only (no loops, conditions or property queries): the
# clock-domain crossings, which need the clocks the IPs create and a loop over the frame
# FIFOs, are in boards/u55c/cdc.tcl, read as unmanaged Tcl after the IPs' own constraints.
# The serial lanes of PCIe and QSFP0 are placed by the IPs (ip.tcl: the PCIe block X1Y0 with
# GTY quads 224-227; CMACE4_X0Y3 with the GT group X0Y24-X0Y27, bank 130).
#
# ./hematite test checks this file without Vivado (scripts/board_check.py): plain commands
# only, every port named here is a port of the top, every top-level port that is not a
# transceiver lane has a pin, and the reference clocks' periods agree with ip.tcl.

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
