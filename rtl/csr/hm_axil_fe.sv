// AXI4-Lite register front end (32-bit data) shared by the register blocks (hm_csr, hm_ctl):
// the channel handshakes, so that a block only decodes addresses and holds its registers.
//
// Writes: AW and W are each taken into a holding register (AWREADY / WREADY low while it is
// full), in either order. Once both are held the block sees wr_pend with the address, data and
// strobes, and answers combinationally with wr_err (the write is refused) and wr_stall (a valid
// write cannot execute yet, e.g. a full FIFO or a busy command). The write executes (wr_do, one
// cycle) when the B slot is free and it is refused or not stalled: the block applies it in that
// cycle, and B answers SLVERR for a refused write, OKAY otherwise. A stalled write holds both
// channels, so nothing is dropped.
//
// Reads: one at a time. AR is taken while R is free (rd_do, one cycle, with rd_addr); the block
// answers rd_data / rd_err combinationally in that cycle and both are registered into R (data
// zero and SLVERR for a refused read).
module hm_axil_fe
  import hm_pkg::*;
#(
  // AXI4-Lite address width.
  parameter int ADDR_WIDTH = 16
) (
  input  logic                  clk,
  input  logic                  rst,

  input  hm_axil_req_t          s_axil_req,
  output hm_axil_rsp_t          s_axil_rsp,

  // The held write and the block's verdict on it
  output logic                  wr_pend,
  output logic [ADDR_WIDTH-1:0] wr_addr,
  output logic [31:0]           wr_data,
  output logic [3:0]            wr_strb,
  input  logic                  wr_err,
  input  logic                  wr_stall,
  output logic                  wr_do,

  // The read being accepted and the block's answer
  output logic                  rd_do,
  output logic [ADDR_WIDTH-1:0] rd_addr,
  input  logic [31:0]           rd_data,
  input  logic                  rd_err
);
  localparam logic [1:0] OKAY = 2'b00, SLVERR = 2'b10;

  logic        aw_v_q, w_v_q, awready, wready, arready, bvalid_q, rvalid_q;
  logic [1:0]  bresp_q, rresp_q;
  logic [31:0] rdata_q;
  assign s_axil_rsp = '{awready: awready, wready: wready, bresp: bresp_q, bvalid: bvalid_q,
                        arready: arready, rdata: rdata_q, rresp: rresp_q, rvalid: rvalid_q};

  assign awready = !aw_v_q;
  assign wready  = !w_v_q;
  assign wr_pend = aw_v_q && w_v_q;
  assign wr_do   = wr_pend && (!bvalid_q || s_axil_req.bready) && (wr_err || !wr_stall);

  always_ff @(posedge clk) begin
    if (s_axil_req.awvalid && awready) wr_addr <= s_axil_req.awaddr[ADDR_WIDTH-1:0];
    if (s_axil_req.wvalid && wready) begin wr_data <= s_axil_req.wdata; wr_strb <= s_axil_req.wstrb; end
    if (wr_do) bresp_q <= wr_err ? SLVERR : OKAY;
    if (rst) begin
      aw_v_q        <= 1'b0;
      w_v_q         <= 1'b0;
      bvalid_q <= 1'b0;
    end else begin
      if (s_axil_req.awvalid && awready) aw_v_q <= 1'b1;
      if (s_axil_req.wvalid && wready) w_v_q <= 1'b1;
      if (bvalid_q && s_axil_req.bready) bvalid_q <= 1'b0;
      if (wr_do) begin
        aw_v_q        <= 1'b0;
        w_v_q         <= 1'b0;
        bvalid_q <= 1'b1;
      end
    end
  end

  assign arready = !rvalid_q;
  assign rd_do   = s_axil_req.arvalid && arready;
  assign rd_addr = s_axil_req.araddr[ADDR_WIDTH-1:0];

  always_ff @(posedge clk) begin
    if (rd_do) begin
      rresp_q <= rd_err ? SLVERR : OKAY;
      rdata_q <= rd_err ? '0 : rd_data;
    end
    if (rst) rvalid_q <= 1'b0;
    else begin
      if (rvalid_q && s_axil_req.rready) rvalid_q <= 1'b0;
      if (rd_do) rvalid_q <= 1'b1;
    end
  end

  logic unused_ok;
  assign unused_ok = ^{s_axil_req.awaddr, s_axil_req.araddr};   // above ADDR_WIDTH: not decoded
endmodule
