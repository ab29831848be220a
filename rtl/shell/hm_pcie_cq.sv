// The shell's completer: the host's requests to the function's BARs, from the UltraScale+ PCIe
// block's completer interfaces, CQ (requests in) and CC (completions out), 512 bits,
// DWORD-aligned mode, no straddling. One request at a time (MMIO is not a data path; the push
// window's 64-byte writes are taken in four clocks).
//
//   - BAR 0 (the function's register space: the engine, the control core's host port, MSI-X;
//     the shell decodes it further): memory reads and writes of 1 to 16 DWORDs become that many
//     32-bit AXI4-Lite accesses at the offset in the BAR, one after another, with the byte
//     enables of the first and last DWORD as strobes (the DWORDs between whole). A read is
//     answered with one completion carrying the data (Completer Abort, no data, when any of
//     the accesses answers an error). Longer requests: Unsupported Request for a read; a write
//     is dropped and counted. A zero-length read (one DWORD, no byte enabled: a flush) reads no
//     register and completes with zeros; a zero-length write writes nothing. While `fence` is
//     up (the blocks behind BAR 0 in reset, an FLR) every BAR 0 access is answered as failed
//     at once without reaching them (a read: Completer Abort), an access part way included.
//   - BAR PUSH_BAR (the push window, write only): a write of exactly 64 bytes at a 64-byte
//     boundary, every byte enabled, is one push (the QP number: offset bits 6 and up, so the BAR
//     is 2^(6 + PUSH_QW) bytes) on m_push_*; any other write there is dropped and counted; a
//     read there of 1 to 16 DWORDs completes with zeros (longer: Unsupported Request).
//   - Every other request: a non-posted one (a read of another BAR, I/O, atomics, locked reads)
//     is answered Unsupported Request; a posted one (a write to another BAR, a message) is
//     dropped and counted. A request the block marks discontinued (tuser bit 96) is dropped and
//     counted, non-posted or not (the block reports the error).
// CQ back-pressures while a request is served; the block's non-posted credit
// (pcie_cq_np_req) may be left always on.
module hm_pcie_cq #(
  parameter int BAR0_AW   = 18,          // BAR 0 offset bits (256 KiB)
  parameter int PUSH_BAR  = 2,           // BAR number of the push window
  parameter int PUSH_QW   = 16,          // QP number bits of a push (offset bits - 6)
  parameter int CNT_W     = 32           // counter width
) (
  input  logic               clk,
  input  logic               rst,
  input  logic               fence,              // BAR 0's blocks are in reset (an FLR): an
                                                 // access is answered as failed at once, and
                                                 // none is offered to them

  // ---- completer request (from the block)
  input  logic [511:0]       s_axis_cq_tdata,
  input  logic [15:0]        s_axis_cq_tkeep,
  input  logic               s_axis_cq_tlast,
  input  logic [182:0]       s_axis_cq_tuser,
  input  logic               s_axis_cq_tvalid,
  output logic               s_axis_cq_tready,

  // ---- completer completion (to the block)
  output logic [511:0]       m_axis_cc_tdata,
  output logic [15:0]        m_axis_cc_tkeep,
  output logic               m_axis_cc_tlast,
  output logic [80:0]        m_axis_cc_tuser,
  output logic               m_axis_cc_tvalid,
  input  logic               m_axis_cc_tready,

  // ---- BAR 0 as AXI4-Lite (32-bit)
  output logic [BAR0_AW-1:0] m_axil_awaddr,
  output logic               m_axil_awvalid,
  input  logic               m_axil_awready,
  output logic [31:0]        m_axil_wdata,
  output logic [3:0]         m_axil_wstrb,
  output logic               m_axil_wvalid,
  input  logic               m_axil_wready,
  input  logic [1:0]         m_axil_bresp,
  input  logic               m_axil_bvalid,
  output logic               m_axil_bready,
  output logic [BAR0_AW-1:0] m_axil_araddr,
  output logic               m_axil_arvalid,
  input  logic               m_axil_arready,
  input  logic [31:0]        m_axil_rdata,
  input  logic [1:0]         m_axil_rresp,
  input  logic               m_axil_rvalid,
  output logic               m_axil_rready,

  // ---- pushes (the engine's s_push_*)
  output logic [PUSH_QW-1:0] m_push_qpn,
  output logic [511:0]       m_push_data,
  output logic               m_push_valid,
  input  logic               m_push_ready,

  // ---- counters
  output logic [CNT_W-1:0]   stat_mmio_wr,       // BAR 0 writes (TLPs)
  output logic [CNT_W-1:0]   stat_mmio_rd,       // BAR 0 reads (TLPs)
  output logic [CNT_W-1:0]   stat_push,          // pushes
  output logic [CNT_W-1:0]   stat_ur,            // requests answered Unsupported Request
  output logic [CNT_W-1:0]   stat_dropped,       // posted requests dropped, discontinued ones
  output logic [CNT_W-1:0]   stat_axil_err       // AXI4-Lite accesses answered an error
);
  localparam logic [3:0] RT_MEM_RD = 4'b0000, RT_MEM_WR = 4'b0001;
  localparam logic [2:0] CS_SC = 3'b000, CS_UR = 3'b001, CS_CA = 3'b100;

  typedef enum logic [3:0] {S_IDLE, S_MORE, S_DRAIN, S_ACT, S_WR, S_RD, S_PREP, S_CPL, S_PUSH}
    state_t;
  state_t st_q;

  // the request
  logic [63:0]  addr_q;
  logic [10:0]  ndw_q;
  logic [3:0]   rtype_q, fbe_q, lbe_q;
  logic [15:0]  rid_q;
  logic [7:0]   tag_q, func_q;
  logic [2:0]   bar_q, tc_q, attr_q;
  logic         disc_q, long_q;          // discontinued; more payload than 16 DWORDs
  logic [31:0]  pay_q [16];              // payload (writes) / data read (reads)
  logic [4:0]   k_q;                     // DWORD being accessed
  logic         aw_done_q, w_done_q, ar_done_q;
  logic [2:0]   cst_q;                   // completion status
  logic [3:0]   cbeats_q;                // completion beats sent

  // a CQ beat
  logic         cq_fire, cq_sop;
  assign s_axis_cq_tready = st_q == S_IDLE || st_q == S_MORE || st_q == S_DRAIN;
  assign cq_fire = s_axis_cq_tvalid && s_axis_cq_tready;
  assign cq_sop  = st_q == S_IDLE;

  // the decision once the whole request is in
  logic         np, is_rd, is_wr, bar0, pbar, fits;
  assign is_rd = rtype_q == RT_MEM_RD;
  assign is_wr = rtype_q == RT_MEM_WR;
  // non-posted: everything but memory writes and messages (request types: 0010/0011 I/O,
  // 0100..0110 atomics, 0111 locked read, 10xx configuration, 11xx messages)
  assign np    = !(is_wr || rtype_q[3:2] == 2'b11);
  assign bar0  = bar_q == 3'd0;
  assign pbar  = bar_q == 3'(PUSH_BAR);
  assign fits  = !long_q && ndw_q != '0 && ndw_q <= 11'd16;
  logic         zlen;                    // zero length: one DWORD, no byte enabled
  assign zlen  = ndw_q == 11'd1 && fbe_q == 4'h0;

  // tuser of a CC beat (no straddling: TLP 0 only; no parity)
  function automatic logic [80:0] cc_user(input logic sop, input logic eop, input logic [3:0] eop_ptr);
    logic [80:0] u;
    u = '0;
    u[0]    = sop;       // is_sop[0] (pointer 0)
    u[6]    = eop;       // is_eop[0]
    u[11:8] = eop_ptr;   // is_eop0_ptr: the last DWORD
    return u;
  endfunction

  // the DWORD's strobes
  logic [3:0]   strb_k;
  assign strb_k = ndw_q == 11'd1 ? fbe_q :
                  k_q == 5'd0 ? fbe_q : (11'(k_q) == ndw_q - 11'd1 ? lbe_q : 4'hf);

  // completion: byte count and lower address of a memory read (PCIe's rules for byte
  // enables); data DWORDs
  function automatic logic [1:0] lo_be(input logic [3:0] be);
    return be[0] ? 2'd0 : be[1] ? 2'd1 : be[2] ? 2'd2 : be[3] ? 2'd3 : 2'd0;
  endfunction
  function automatic logic [1:0] hi_be(input logic [3:0] be);
    logic unused_b0;
    unused_b0 = be[0];   // (bit 0 set or none: 0 either way)
    return be[3] ? 2'd3 : be[2] ? 2'd2 : be[1] ? 2'd1 : 2'd0;
  endfunction
  // (registered in S_PREP, the clock before the completion goes out)
  logic [12:0]  bcount;
  logic [10:0]  cdw;                     // data DWORDs in the completion
  logic [95:0]  cdesc_q;
  logic [1023:0] cstream;                // descriptor then data, two beats (DWORDs beyond the
                                         // completion's length are not kept)
  logic [4:0]   clen_q;                  // DWORDs on CC in all
  logic         one_q;                   // one beat
  // (for a request other than a memory read, locked or not, the byte count is what the PCIe
  // specification gives it: 4 for I/O, the operand size for an AtomicOp, half the request for
  // a compare-and-swap; the lower address is 0)
  logic         memrd, locked;
  assign memrd  = is_rd || rtype_q == 4'b0111;
  assign locked = rtype_q == 4'b0111;
  always_comb begin
    if (!memrd)
      bcount = rtype_q[3:1] == 3'b001 ? 13'd4 :                       // I/O
               rtype_q == 4'b0110 ? 13'({ndw_q, 1'b0}) : 13'({ndw_q, 2'b00}); // CAS; others
    else if (ndw_q == 11'd1)
      bcount = fbe_q == '0 ? 13'd1 : 13'(hi_be(fbe_q)) - 13'(lo_be(fbe_q)) + 13'd1;
    else
      bcount = {ndw_q, 2'b00} - 13'(lo_be(fbe_q)) - (13'd3 - 13'(hi_be(lbe_q)));
    cdw   = cst_q == CS_SC ? ndw_q : 11'd0;
    cstream = '0;
    cstream[95:0] = cdesc_q;
    for (int i = 0; i < 16; i++) cstream[96 + 32*i +: 32] = pay_q[i];
  end

  // ---- AXI4-Lite
  logic [BAR0_AW-1:0] a_q;               // the DWORD being accessed
  assign m_axil_awaddr  = a_q;
  assign m_axil_araddr  = a_q;
  // (an address is offered from the clock after it is set, so that a decode behind this
  // block may register it: gap_q)
  logic gap_q;
  assign m_axil_awvalid = st_q == S_WR && !aw_done_q && !fence && !gap_q;
  assign m_axil_wvalid  = st_q == S_WR && !w_done_q && !fence && !gap_q;
  assign m_axil_wdata   = pay_q[k_q[3:0]];
  assign m_axil_wstrb   = strb_k;
  assign m_axil_bready  = st_q == S_WR;
  assign m_axil_arvalid = st_q == S_RD && !ar_done_q && !fence && !gap_q;
  assign m_axil_rready  = st_q == S_RD;

  assign m_push_valid = st_q == S_PUSH;
  assign m_push_qpn   = addr_q[6 +: PUSH_QW];
  always_comb for (int i = 0; i < 16; i++) m_push_data[32*i +: 32] = pay_q[i];

  logic [CNT_W-1:0] n_wr_q, n_rd_q, n_push_q, n_ur_q, n_drop_q, n_axerr_q;
  logic             last_k;
  assign last_k = 11'(k_q) == ndw_q - 11'd1;

  always_ff @(posedge clk) begin
    // ---- taking the request
    if (cq_fire && cq_sop) begin
      addr_q  <= {s_axis_cq_tdata[63:2], 2'b00};
      ndw_q   <= s_axis_cq_tdata[74:64];
      rtype_q <= s_axis_cq_tdata[78:75];
      rid_q   <= s_axis_cq_tdata[95:80];
      tag_q   <= s_axis_cq_tdata[103:96];
      func_q  <= s_axis_cq_tdata[111:104];
      bar_q   <= s_axis_cq_tdata[114:112];
      tc_q    <= s_axis_cq_tdata[123:121];
      attr_q  <= s_axis_cq_tdata[126:124];
      fbe_q   <= s_axis_cq_tuser[3:0];
      lbe_q   <= s_axis_cq_tuser[11:8];
      disc_q  <= s_axis_cq_tuser[96];
      long_q  <= 1'b0;
      for (int i = 0; i < 12; i++) pay_q[i] <= s_axis_cq_tdata[128 + 32*i +: 32];
    end
    if (cq_fire && !cq_sop) begin
      if (s_axis_cq_tuser[96]) disc_q <= 1'b1;
      if (st_q == S_MORE) begin
        for (int i = 0; i < 4; i++) pay_q[12 + i] <= s_axis_cq_tdata[32*i +: 32];
        if (!s_axis_cq_tlast) long_q <= 1'b1;
      end
    end
    // ---- reads: the data
    if (st_q == S_RD && (m_axil_rvalid || fence)) begin
      pay_q[k_q[3:0]] <= fence ? 32'd0 : m_axil_rdata;
      if (fence || m_axil_rresp != 2'b00) cst_q <= CS_CA;
    end
    if (st_q == S_ACT) cst_q <= !np || (bar0 || pbar) && is_rd && fits ? CS_SC : CS_UR;
    if (st_q == S_ACT && (pbar || zlen) && is_rd) for (int i = 0; i < 16; i++) pay_q[i] <= '0;
    if (st_q == S_ACT) a_q <= {addr_q[BAR0_AW-1:2], 2'b00};
    gap_q <= st_q == S_ACT || (st_q == S_WR && (m_axil_bvalid || fence)) ||
             (st_q == S_RD && (m_axil_rvalid || fence));
    if ((st_q == S_WR && (m_axil_bvalid || fence)) || (st_q == S_RD && (m_axil_rvalid || fence)))
      a_q <= a_q + BAR0_AW'(4);
    if (st_q == S_PREP) begin
      // (completer ID from the block: bus 0 and ID enable 0; not poisoned; address type 0)
      cdesc_q <= {1'b0, attr_q, tc_q, 1'b0, 8'h00, func_q, tag_q, rid_q, 1'b0, 1'b0,
                  cst_q, cdw, 2'b00, locked, bcount, 6'd0, 2'b00, 1'b0,
                  memrd ? {addr_q[6:2], lo_be(fbe_q)} : 7'd0};
      clen_q  <= 5'd3 + 5'(cdw);
      one_q   <= 5'd3 + 5'(cdw) <= 5'd16;
    end

    // ---- CC
    if (m_axis_cc_tready) m_axis_cc_tvalid <= 1'b0;
    if (st_q == S_CPL && (!m_axis_cc_tvalid || m_axis_cc_tready)) begin
      m_axis_cc_tvalid <= 1'b1;
      if (cbeats_q == '0) begin
        m_axis_cc_tdata <= cstream[511:0];
        m_axis_cc_tkeep <= !one_q ? 16'hffff : 16'((17'h1 << clen_q) - 17'h1);
        m_axis_cc_tlast <= one_q;
        m_axis_cc_tuser <= cc_user(1'b1, one_q, one_q ? 4'(clen_q - 5'd1) : 4'd0);
      end else begin
        m_axis_cc_tdata <= cstream[1023:512];
        m_axis_cc_tkeep <= 16'((17'h1 << (clen_q - 5'd16)) - 17'h1);
        m_axis_cc_tlast <= 1'b1;
        m_axis_cc_tuser <= cc_user(1'b0, 1'b1, 4'(clen_q - 5'd17));
      end
      cbeats_q <= cbeats_q + 4'd1;
    end

    if (rst) begin
      st_q <= S_IDLE;
      m_axis_cc_tvalid <= 1'b0;
      aw_done_q <= 1'b0; w_done_q <= 1'b0; ar_done_q <= 1'b0;
      n_wr_q <= '0; n_rd_q <= '0; n_push_q <= '0; n_ur_q <= '0; n_drop_q <= '0; n_axerr_q <= '0;
    end else begin
      unique case (st_q)
        S_IDLE, S_MORE, S_DRAIN: begin
          if (cq_fire) begin
            if (s_axis_cq_tlast) st_q <= S_ACT;
            else st_q <= st_q == S_IDLE ? S_MORE : S_DRAIN;
          end
        end
        S_ACT: begin
          k_q <= '0;
          cbeats_q <= '0;
          aw_done_q <= 1'b0; w_done_q <= 1'b0; ar_done_q <= 1'b0;
          if (disc_q) begin
            st_q <= S_IDLE;
            n_drop_q <= n_drop_q + 1'b1;
          end else if (is_wr && bar0 && fits) begin
            // (a zero-length write, one DWORD with no byte enabled, writes nothing)
            st_q <= zlen ? S_IDLE : S_WR;
            n_wr_q <= n_wr_q + 1'b1;
          end else if (is_wr && pbar && fits && ndw_q == 11'd16 && addr_q[5:2] == '0 &&
                       fbe_q == 4'hf && lbe_q == 4'hf) begin
            st_q <= S_PUSH;
          end else if (is_rd && bar0 && fits) begin
            // (a zero-length read, a flush, reads no register: it completes with zeros)
            st_q <= zlen ? S_PREP : S_RD;
            n_rd_q <= n_rd_q + 1'b1;
          end else if (is_rd && pbar && fits) begin
            st_q <= S_PREP;
          end else if (np) begin
            st_q <= S_PREP;
            n_ur_q <= n_ur_q + 1'b1;
          end else begin
            st_q <= S_IDLE;
            n_drop_q <= n_drop_q + 1'b1;
          end
        end
        S_WR: begin
          if (m_axil_awvalid && m_axil_awready) aw_done_q <= 1'b1;
          if (m_axil_wvalid && m_axil_wready) w_done_q <= 1'b1;
          if (m_axil_bvalid || fence) begin
            if (fence || m_axil_bresp != 2'b00) n_axerr_q <= n_axerr_q + 1'b1;
            aw_done_q <= 1'b0;
            w_done_q  <= 1'b0;
            k_q <= k_q + 5'd1;
            if (last_k) st_q <= S_IDLE;
          end
        end
        S_RD: begin
          if (m_axil_arvalid && m_axil_arready) ar_done_q <= 1'b1;
          if (m_axil_rvalid || fence) begin
            if (fence || m_axil_rresp != 2'b00) n_axerr_q <= n_axerr_q + 1'b1;
            ar_done_q <= 1'b0;
            k_q <= k_q + 5'd1;
            if (last_k) st_q <= S_PREP;
          end
        end
        S_PREP: st_q <= S_CPL;
        S_CPL: begin
          if (!m_axis_cc_tvalid || m_axis_cc_tready) begin
            if (cbeats_q != '0 || one_q) st_q <= S_IDLE;
          end
        end
        S_PUSH: begin
          if (m_push_ready) begin
            st_q <= S_IDLE;
            n_push_q <= n_push_q + 1'b1;
          end
        end
        default: st_q <= S_IDLE;
      endcase
    end
  end

  assign stat_mmio_wr  = n_wr_q;
  assign stat_mmio_rd  = n_rd_q;
  assign stat_push     = n_push_q;
  assign stat_ur       = n_ur_q;
  assign stat_dropped  = n_drop_q;
  assign stat_axil_err = n_axerr_q;

  // (tkeep and the byte enables: the descriptor's DWORD count and first/last BE say it all)
  logic unused_ok;
  assign unused_ok = ^{s_axis_cq_tkeep, s_axis_cq_tuser[182:97], s_axis_cq_tuser[95:12],
                       s_axis_cq_tuser[7:4], addr_q[63:BAR0_AW], addr_q[1:0]};

endmodule
