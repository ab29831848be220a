# The U55C's hard IPs, as boards/u55c/hm_u55c_top.sv instantiates them. Sourced by
# boards/u55c/build.tcl inside its in-memory project; writes the IPs under $ip_dir.
#
# Every value that the RTL or the host software also knows is checked against them by
# scripts/board_check.py in ./hematite test (without Vivado): the link and interface width,
# the BARs and the MSI-X table against hm_pcie_ep and the register map (regs/hematite.rdl
# hm_bar), the vector count against hm_u55c_top's NUM_VEC, the PCI IDs against the host
# driver's placeholder IDs (run/src/cards.rs), the CMAC's clocks against the constraints.

# ---- PCIe: PCIE4C block X1Y0 (the edge connector), Gen3 x16, 512-bit user interfaces at
# 250 MHz, DWORD-aligned without straddling, client tags (hm_pcie_dma), MSI-X with the table
# in the design (hm_msix, BAR 0 at 0x20000), physical function 0 only.
set hm_pcie_cfg [dict create \
    CONFIG.mode_selection                     {Advanced} \
    CONFIG.pcie_blk_locn                      {X1Y0} \
    CONFIG.PL_LINK_CAP_MAX_LINK_SPEED         {8.0_GT/s} \
    CONFIG.PL_LINK_CAP_MAX_LINK_WIDTH         {X16} \
    CONFIG.axisten_if_width                   {512_bit} \
    CONFIG.axisten_freq                       {250} \
    CONFIG.AXISTEN_IF_CQ_ALIGNMENT_MODE       {DWORD_Aligned} \
    CONFIG.AXISTEN_IF_CC_ALIGNMENT_MODE       {DWORD_Aligned} \
    CONFIG.AXISTEN_IF_RQ_ALIGNMENT_MODE       {DWORD_Aligned} \
    CONFIG.AXISTEN_IF_RC_ALIGNMENT_MODE       {DWORD_Aligned} \
    CONFIG.AXISTEN_IF_EXT_512_CQ_STRADDLE     {false} \
    CONFIG.AXISTEN_IF_EXT_512_CC_STRADDLE     {false} \
    CONFIG.AXISTEN_IF_EXT_512_RQ_STRADDLE     {false} \
    CONFIG.AXISTEN_IF_EXT_512_RC_4TLP_STRADDLE {false} \
    CONFIG.axisten_if_enable_client_tag       {true} \
    CONFIG.extended_tag_field                 {true} \
    CONFIG.pf0_dev_cap_max_payload            {1024_bytes} \
    CONFIG.vendor_id                          {10EE} \
    CONFIG.PF0_DEVICE_ID                      {903F} \
    CONFIG.PF0_SUBSYSTEM_VENDOR_ID            {10EE} \
    CONFIG.PF0_SUBSYSTEM_ID                   {903F} \
    CONFIG.PF0_Use_Class_Code_Lookup_Assistant {false} \
    CONFIG.PF0_CLASS_CODE                     {020000} \
    CONFIG.PF0_INTERRUPT_PIN                  {NONE} \
    CONFIG.pf0_bar0_enabled                   {true} \
    CONFIG.pf0_bar0_64bit                     {false} \
    CONFIG.pf0_bar0_prefetchable              {false} \
    CONFIG.pf0_bar0_scale                     {Kilobytes} \
    CONFIG.pf0_bar0_size                      {256} \
    CONFIG.pf0_bar2_enabled                   {true} \
    CONFIG.pf0_bar2_64bit                     {true} \
    CONFIG.pf0_bar2_prefetchable              {true} \
    CONFIG.pf0_bar2_scale                     {Megabytes} \
    CONFIG.pf0_bar2_size                      {4} \
    CONFIG.pf0_msi_enabled                    {false} \
    CONFIG.pf0_msix_enabled                   {true} \
    CONFIG.MSI_X_OPTIONS                      {MSI-X_External} \
    CONFIG.PF0_MSIX_CAP_TABLE_SIZE            {01F} \
    CONFIG.PF0_MSIX_CAP_TABLE_BIR             {BAR_0} \
    CONFIG.PF0_MSIX_CAP_TABLE_OFFSET          {00020000} \
    CONFIG.PF0_MSIX_CAP_PBA_BIR               {BAR_0} \
    CONFIG.PF0_MSIX_CAP_PBA_OFFSET            {00020800} \
    CONFIG.en_transceiver_status_ports        {false} \
]

# ---- CMAC of QSFP28 port 0: CMACE4_X0Y3 with the GTYs of bank 130 (X0Y24-X0Y27), 4 x 25G
# CAUI-4 with RS-FEC, its 161.1328125 MHz reference clock, a 512-bit AXI4-Stream user
# interface (322.265625 MHz), no AXI4-Lite registers (the ctl_* ports are driven by the top),
# no statistics counters, no pause processing in the MAC: the shell sends PFC from its receive
# FIFO's level (hm_pfc_gen) and the engine honours received PFC frames (hm_pfc_rx), so the MAC
# forwards control frames to the user side.
set hm_cmac_cfg [dict create \
    CONFIG.CMAC_CAUI4_MODE                    {1} \
    CONFIG.NUM_LANES                          {4x25} \
    CONFIG.CMAC_CORE_SELECT                   {CMACE4_X0Y3} \
    CONFIG.GT_GROUP_SELECT                    {X0Y24~X0Y27} \
    CONFIG.LANE1_GT_LOC                       {X0Y24} \
    CONFIG.LANE2_GT_LOC                       {X0Y25} \
    CONFIG.LANE3_GT_LOC                       {X0Y26} \
    CONFIG.LANE4_GT_LOC                       {X0Y27} \
    CONFIG.GT_REF_CLK_FREQ                    {161.1328125} \
    CONFIG.GT_DRP_CLK                         {100.00} \
    CONFIG.USER_INTERFACE                     {AXIS} \
    CONFIG.ENABLE_AXI_INTERFACE               {0} \
    CONFIG.INCLUDE_STATISTICS_COUNTERS        {0} \
    CONFIG.INCLUDE_RS_FEC                     {1} \
    CONFIG.ENABLE_PIPELINE_REG                {1} \
    CONFIG.TX_FLOW_CONTROL                    {0} \
    CONFIG.RX_FLOW_CONTROL                    {0} \
    CONFIG.RX_FORWARD_CONTROL_FRAMES          {1} \
    CONFIG.RX_MAX_PACKET_LEN                  {9600} \
    CONFIG.RX_GT_BUFFER                       {1} \
]

foreach {name ipdef cfg} [list hm_u55c_pcie pcie4c_uscale_plus $hm_pcie_cfg \
                               hm_u55c_cmac cmac_usplus $hm_cmac_cfg] {
    create_ip -name $ipdef -vendor xilinx.com -library ip -module_name $name -dir $ip_dir
    set_property -dict $cfg [get_ips $name]
    generate_target {synthesis implementation} [get_ips $name]
    synth_ip [get_ips $name]
}
