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
module hm_axil_fe #(
  // AXI4-Lite address width.
  parameter int ADDR_WIDTH = 16
) (
  input  logic                  clk,
  input  logic                  rst,

  input  logic [ADDR_WIDTH-1:0] s_axil_awaddr,
  input  logic                  s_axil_awvalid,
  output logic                  s_axil_awready,
  input  logic [31:0]           s_axil_wdata,
  input  logic [3:0]            s_axil_wstrb,
  input  logic                  s_axil_wvalid,
  output logic                  s_axil_wready,
  output logic [1:0]            s_axil_bresp,
  output logic                  s_axil_bvalid,
  input  logic                  s_axil_bready,
  input  logic [ADDR_WIDTH-1:0] s_axil_araddr,
  input  logic                  s_axil_arvalid,
  output logic                  s_axil_arready,
  output logic [31:0]           s_axil_rdata,
  output logic [1:0]            s_axil_rresp,
  output logic                  s_axil_rvalid,
  input  logic                  s_axil_rready,

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

  logic aw_v_q, w_v_q;

  assign s_axil_awready = !aw_v_q;
  assign s_axil_wready  = !w_v_q;
  assign wr_pend = aw_v_q && w_v_q;
  assign wr_do   = wr_pend && (!s_axil_bvalid || s_axil_bready) && (wr_err || !wr_stall);

  always_ff @(posedge clk) begin
    if (s_axil_awvalid && s_axil_awready) wr_addr <= s_axil_awaddr;
    if (s_axil_wvalid && s_axil_wready) begin wr_data <= s_axil_wdata; wr_strb <= s_axil_wstrb; end
    if (wr_do) s_axil_bresp <= wr_err ? SLVERR : OKAY;
    if (rst) begin
      aw_v_q        <= 1'b0;
      w_v_q         <= 1'b0;
      s_axil_bvalid <= 1'b0;
    end else begin
      if (s_axil_awvalid && s_axil_awready) aw_v_q <= 1'b1;
      if (s_axil_wvalid && s_axil_wready) w_v_q <= 1'b1;
      if (s_axil_bvalid && s_axil_bready) s_axil_bvalid <= 1'b0;
      if (wr_do) begin
        aw_v_q        <= 1'b0;
        w_v_q         <= 1'b0;
        s_axil_bvalid <= 1'b1;
      end
    end
  end

  assign s_axil_arready = !s_axil_rvalid;
  assign rd_do   = s_axil_arvalid && s_axil_arready;
  assign rd_addr = s_axil_araddr;

  always_ff @(posedge clk) begin
    if (rd_do) begin
      s_axil_rresp <= rd_err ? SLVERR : OKAY;
      s_axil_rdata <= rd_err ? '0 : rd_data;
    end
    if (rst) s_axil_rvalid <= 1'b0;
    else begin
      if (s_axil_rvalid && s_axil_rready) s_axil_rvalid <= 1'b0;
      if (rd_do) s_axil_rvalid <= 1'b1;
    end
  end
endmodule
