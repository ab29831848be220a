// MSI-X for the shell: the vector table and the pending-bit array (PBA) in a BAR window, and the
// messages to the UltraScale+ PCIe block's MSI-X interface (its "external table" mode, where
// the table lives in user logic).
//
// The core's interrupt messages (s_irq_vec: one event on a vector) set the vector's pending bit.
// A pending vector whose entry is unmasked, while MSI-X is enabled and the function is not
// masked, is sent: the entry's address and data on cfg_interrupt_msix_address/_data with a
// one-clock pulse on cfg_interrupt_msix_int; the block answers with _sent or _fail. The pending
// bit is cleared when the message is launched (an event that arrives after that sets it again:
// events on one vector coalesce while it is pending, as MSI-X allows); a failed message sets it
// again and is retried, as is one the block leaves unanswered for TIMEOUT clocks (a link
// going down, a hot reset: the sender never hangs). A masked vector keeps its pending bit, visible in the PBA, and is sent
// once unmasked. The sender looks at one vector per clock, round robin (NUM_VEC clocks at most
// to find a pending one, while no message is outstanding: one message at a time).
//
// Window (AXI4-Lite, 32-bit accesses; the capability's table and PBA offsets, BIR = this BAR):
//   0x000 + 16*v   entry v: +0 message address low, +4 address high, +8 data,
//                  +12 vector control (bit 0: mask; 1 after reset, as the PCIe spec requires)
//   PBA_OFFSET + 4*k   pending bits of vectors 32k..32k+31 (read only; writes are ignored)
// Reads elsewhere in the window return 0, writes there are ignored (both answered OKAY, as a
// PCIe function answers reserved space). Vector numbers >= NUM_VEC from the core are dropped and
// counted (stat_bad_vec).
module hm_msix
  import hm_pkg::*;
#(
  parameter int NUM_VEC    = 32,                 // vectors, 1..256 (the core's vector is 8 bits)
  parameter int ADDR_W     = 12,                 // window address bits (4 KiB)
  parameter int PBA_OFFSET = 'h800,              // byte offset of the PBA, 8-byte aligned
  parameter int TIMEOUT    = 65536               // clocks to wait for _sent / _fail (a request
                                                 // left unanswered counts as refused)
) (
  input  logic              clk,
  input  logic              rst,                 // synchronous, active high

  // ---- the BAR window (AXI4-Lite slave)
  input  logic [ADDR_W-1:0] s_axil_awaddr,
  input  logic              s_axil_awvalid,
  output logic              s_axil_awready,
  input  logic [31:0]       s_axil_wdata,
  input  logic [3:0]        s_axil_wstrb,
  input  logic              s_axil_wvalid,
  output logic              s_axil_wready,
  output logic [1:0]        s_axil_bresp,
  output logic              s_axil_bvalid,
  input  logic              s_axil_bready,
  input  logic [ADDR_W-1:0] s_axil_araddr,
  input  logic              s_axil_arvalid,
  output logic              s_axil_arready,
  output logic [31:0]       s_axil_rdata,
  output logic [1:0]        s_axil_rresp,
  output logic              s_axil_rvalid,
  input  logic              s_axil_rready,

  // ---- interrupt events from the core (hm_rc_engine's m_irq_*)
  input  logic [7:0]        s_irq_vec,
  input  logic              s_irq_valid,
  output logic              s_irq_ready,         // always 1: an event only sets a bit

  // ---- the PCIe block's MSI-X interface (external table)
  input  logic              cfg_interrupt_msix_enable,   // MSI-X Enable of the function
  input  logic              cfg_interrupt_msix_mask,     // Function Mask of the function
  output logic [63:0]       cfg_interrupt_msix_address,
  output logic [31:0]       cfg_interrupt_msix_data,
  output logic              cfg_interrupt_msix_int,      // one-clock request
  input  logic              cfg_interrupt_msix_sent,
  input  logic              cfg_interrupt_msix_fail,

  output logic [31:0]       stat_sent,           // messages sent
  output logic [31:0]       stat_fail,           // messages the block refused (retried)
  output logic [31:0]       stat_timeout,        // requests left unanswered (retried)
  output logic [31:0]       stat_bad_vec         // events for vectors >= NUM_VEC (dropped)
);
  localparam int VW = NUM_VEC > 1 ? $clog2(NUM_VEC) : 1;
  localparam int PW = (NUM_VEC + 31) / 32;       // PBA dwords

  // ---- the table: address and data in distributed RAM; mask bits in flops (they reset to 1)
  logic [31:0]        alo_mem  [NUM_VEC];
  logic [31:0]        ahi_mem  [NUM_VEC];
  logic [31:0]        data_mem [NUM_VEC];
  logic [NUM_VEC-1:0] mask_q, pend_q;

  // ---------------------------------------------------------------- AXI4-Lite
  // (the channel handshakes are the register blocks' front end, hm_axil_fe; every access is
  // answered OKAY: reserved space reads 0 and ignores writes)
  logic              wr_pend_unused, wr_do, rd_do_unused;
  logic [ADDR_W-1:0] aw_q, s_araddr_fe;
  logic [31:0]       w_q;
  logic [3:0]        ws_q;
  hm_axil_req_t      axil_req;
  hm_axil_rsp_t      axil_rsp;
  assign axil_req = '{awaddr: 32'(s_axil_awaddr), awvalid: s_axil_awvalid, wdata: s_axil_wdata,
                      wstrb: s_axil_wstrb, wvalid: s_axil_wvalid, bready: s_axil_bready,
                      araddr: 32'(s_axil_araddr), arvalid: s_axil_arvalid, rready: s_axil_rready};
  assign {s_axil_awready, s_axil_wready, s_axil_bresp, s_axil_bvalid, s_axil_arready, s_axil_rdata,
          s_axil_rresp, s_axil_rvalid} = axil_rsp;

  // the write the front end holds (applied in its wr_do cycle)
  logic        wr_tab;
  logic [VW-1:0] wr_vec;
  logic [1:0]  wr_word;
  logic [31:0] wr_bits;                          // the write merged over the byte strobes
  always_comb begin
    wr_tab  = 32'(aw_q) < 16 * NUM_VEC;
    wr_vec  = VW'(32'(aw_q) >> 4);
    wr_word = aw_q[3:2];
    for (int b = 0; b < 4; b++) wr_bits[8*b +: 8] = ws_q[b] ? w_q[8*b +: 8] : 8'h00;
  end
  // (partial writes of a table word keep the other bytes: the old word is read first)
  logic [31:0] wr_old, wr_new;
  always_comb begin
    unique case (wr_word)
      2'd0:    wr_old = alo_mem[wr_vec];
      2'd1:    wr_old = ahi_mem[wr_vec];
      2'd2:    wr_old = data_mem[wr_vec];
      default: wr_old = {31'd0, mask_q[wr_vec]};
    endcase
    for (int b = 0; b < 4; b++) wr_new[8*b +: 8] = ws_q[b] ? wr_bits[8*b +: 8] : wr_old[8*b +: 8];
  end

  always_ff @(posedge clk) begin
    if (wr_do && wr_tab) begin
      unique case (wr_word)
        2'd0:    alo_mem[wr_vec]  <= wr_new;
        2'd1:    ahi_mem[wr_vec]  <= wr_new;
        2'd2:    data_mem[wr_vec] <= wr_new;
        default: ;
      endcase
    end
  end

  // reads: one at a time, registered by the front end
  logic          rd_tab, rd_pba;
  logic [VW-1:0] rd_vec;
  logic [31:0]   rd_val;
  always_comb begin
    rd_tab = 32'(s_araddr_fe) < 16 * NUM_VEC;
    rd_pba = 32'(s_araddr_fe) >= PBA_OFFSET && 32'(s_araddr_fe) < PBA_OFFSET + 4 * PW;
    rd_vec = VW'(32'(s_araddr_fe) >> 4);
    rd_val = 32'd0;
    if (rd_tab) begin
      unique case (s_araddr_fe[3:2])
        2'd0:    rd_val = alo_mem[rd_vec];
        2'd1:    rd_val = ahi_mem[rd_vec];
        2'd2:    rd_val = data_mem[rd_vec];
        default: rd_val = {31'd0, mask_q[rd_vec]};
      endcase
    end else if (rd_pba) begin
      logic [32*PW-1:0] pba;
      pba    = (32 * PW)'(pend_q);
      rd_val = pba[32 * ((32'(s_araddr_fe) - PBA_OFFSET) >> 2) +: 32];
    end
  end
  hm_axil_fe #(.ADDR_WIDTH(ADDR_W)) u_fe (
    .clk, .rst, .s_axil_req(axil_req), .s_axil_rsp(axil_rsp),
    .wr_pend(wr_pend_unused), .wr_addr(aw_q), .wr_data(w_q), .wr_strb(ws_q), .wr_err(1'b0),
    .wr_stall(1'b0), .wr_do, .rd_do(rd_do_unused), .rd_addr(s_araddr_fe), .rd_data(rd_val), .rd_err(1'b0));

  // ---------------------------------------------------------------- the sender
  typedef enum logic [1:0] {S_SCAN, S_WAIT} st_t;
  st_t           st_q;
  logic [VW-1:0] scan_q, cur_q;
  logic          go, ev_in, expired;
  logic [$clog2(TIMEOUT+1)-1:0] wait_q;         // clocks waited for the answer
  assign expired = 32'(wait_q) == TIMEOUT;
  assign s_irq_ready = 1'b1;
  assign ev_in = s_irq_valid && 32'(s_irq_vec) < NUM_VEC;
  assign go    = st_q == S_SCAN && pend_q[scan_q] && !mask_q[scan_q] &&
                 cfg_interrupt_msix_enable && !cfg_interrupt_msix_mask;

  always_ff @(posedge clk) begin
    if (go) begin
      cfg_interrupt_msix_address <= {ahi_mem[scan_q], alo_mem[scan_q]};
      cfg_interrupt_msix_data    <= data_mem[scan_q];
    end
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      st_q                   <= S_SCAN;
      scan_q                 <= '0;
      cur_q                  <= '0;
      mask_q                 <= '1;
      pend_q                 <= '0;
      cfg_interrupt_msix_int <= 1'b0;
      stat_sent              <= '0;
      stat_fail              <= '0;
      stat_bad_vec           <= '0;
      stat_timeout           <= '0;
      wait_q                 <= '0;
    end else begin
      cfg_interrupt_msix_int <= go;
      if (wr_do && wr_tab && wr_word == 2'd3 && ws_q[0]) mask_q[wr_vec] <= w_q[0];
      if (s_irq_valid && !ev_in) stat_bad_vec <= stat_bad_vec + 1'b1;
      unique case (st_q)
        S_SCAN: begin
          if (go) begin
            st_q   <= S_WAIT;
            cur_q  <= scan_q;
            wait_q <= '0;
          end
          scan_q <= (32'(scan_q) == NUM_VEC - 1) ? '0 : scan_q + 1'b1;
        end
        default: begin
          if (cfg_interrupt_msix_sent) begin
            st_q      <= S_SCAN;
            stat_sent <= stat_sent + 1'b1;
          end else if (cfg_interrupt_msix_fail) begin
            st_q      <= S_SCAN;
            stat_fail <= stat_fail + 1'b1;
          end else if (expired) begin
            st_q         <= S_SCAN;
            stat_timeout <= stat_timeout + 1'b1;
          end else begin
            wait_q <= wait_q + 1'b1;
          end
        end
      endcase
      // pending bits: cleared at launch, set again by a failure, set by an event (last wins)
      if (go) pend_q[scan_q] <= 1'b0;
      if (st_q == S_WAIT && !cfg_interrupt_msix_sent && (cfg_interrupt_msix_fail || expired))
        pend_q[cur_q] <= 1'b1;
      if (ev_in) pend_q[VW'(s_irq_vec)] <= 1'b1;
    end
  end

  logic unused_ok;
  assign unused_ok = ^{wr_pend_unused, rd_do_unused};

  if (NUM_VEC < 1 || NUM_VEC > 256) begin : g_bad_num
    $error("hm_msix: NUM_VEC must be 1..256");
  end
  if (PBA_OFFSET % 8 != 0 || PBA_OFFSET < 16 * NUM_VEC || PBA_OFFSET + 4 * PW > (1 << ADDR_W)) begin : g_bad_pba
    $error("hm_msix: PBA_OFFSET must be 8-byte aligned, after the table and inside the window");
  end
endmodule
