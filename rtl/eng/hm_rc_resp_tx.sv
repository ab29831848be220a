// Response generator: turns the responder's response jobs into header records (and READ
// response payload) for the TX path. ACK/NAK: one ACKNOWLEDGE packet with AETH. Atomic: one
// ATOMIC ACKNOWLEDGE with AETH and the original value. READ: packets of up to the path MTU
// (ONLY, or FIRST / MIDDLE... / LAST; AETH on all but MIDDLE), each with its payload read
// from host memory. A job waits until the responder's writes issued before it have
// completed (wr_seq), so an ACK never overtakes the data it acknowledges and a READ sees
// every WRITE before it.
//
// CNPs (congestion notification packets, BTH opcode 0x81 with BECN and 16 reserved bytes, to
// the QP that sent a CE-marked request) come on s_cnp_* and go ahead of the responses, between
// two packets; they carry the CNP DSCP and 802.1p priority of the registers and ECT(0), PSN 0,
// P_Key 0xFFFF, as ConnectX CNPs on the wire do (ROCEV2.md section 4).
module hm_rc_resp_tx
  import hm_pkg::*;
  import hm_eng_pkg::*;
#(
  // Jobs queued (power of two).
  parameter int JOB_DEPTH = 16
) (
  input  logic         clk,
  input  logic         rst,

  input  hm_rjob_t     s_job,
  input  logic         s_job_valid,
  output logic         s_job_ready,
  input  logic [31:0]  wr_done,

  // CNPs to send (addressing of the QP; kind and sequence fields are ignored)
  input  hm_rjob_t     s_cnp,
  input  logic         s_cnp_valid,
  output logic         s_cnp_ready,
  input  logic [5:0]   cfg_cnp_dscp,
  input  logic [2:0]   cfg_cnp_prio,
  input  logic [7:0]   pfc_paused,        // priorities paused by PFC: their packets wait

  // Header records
  output hm_roce_hdr_t m_hdr,
  output logic         m_hdr_valid,
  input  logic         m_hdr_ready,

  // READ payload: DMA read requests (the data goes straight to the TX payload input)
  output hm_dma_req_t  m_rd,
  output logic         m_rd_valid,
  input  logic         m_rd_ready,

  output logic [31:0]  stat_pkts,
  output logic [31:0]  stat_cnps
);
  hm_rjob_t j;
  logic     j_valid, j_pop;
  logic [$clog2(JOB_DEPTH+1):0] level;
  hm_fifo #(.WIDTH($bits(hm_rjob_t)), .DEPTH(JOB_DEPTH)) u_jobs (
    .clk, .rst, .s_data(s_job), .s_valid(s_job_valid), .s_ready(s_job_ready),
    .m_data(j), .m_valid(j_valid), .m_ready(j_pop), .level(level));

  // packet k of the current READ job
  logic [31:0] off_q;
  logic [23:0] k_q;
  logic [3:0]  lpmtu;
  logic [12:0] pmtu;
  logic [31:0] rem;
  logic        first, last, ready_j;
  logic [12:0] plen;
  assign lpmtu   = 4'd7 + 4'(j.pmtu);
  assign pmtu    = 13'd1 << lpmtu;
  assign rem     = j.len - off_q;
  assign first   = off_q == '0;
  assign last    = j.kind != HM_RJ_READ || rem <= 32'(pmtu);
  assign plen    = j.kind != HM_RJ_READ ? 13'd0 : (last ? 13'(rem) : pmtu);
  // the writes issued before the job have completed
  assign ready_j = j_valid && $signed(wr_done - j.wr_seq) >= 0;

  hm_roce_hdr_t cnp_hdr;
  always_comb begin
    cnp_hdr            = hm_av_hdr(s_cnp.av);
    cnp_hdr.vlan_pcp   = s_cnp.av.vlan_valid ? cfg_cnp_prio : 3'd0;
    cnp_hdr.dscp       = cfg_cnp_dscp;
    cnp_hdr.ecn        = 2'b10;
    cnp_hdr.pkey       = 16'hFFFF;
    cnp_hdr.opcode     = HM_OP_CNP;
    cnp_hdr.becn       = 1'b1;
  end

  // a CNP is chosen unless a response header is already on offer (it stays until taken)
  logic lock_q, sel_cnp;
  hm_roce_hdr_t job_hdr;
  logic cnp_paused, job_paused;
  assign cnp_paused = pfc_paused[s_cnp.av.vlan_valid ? cfg_cnp_prio : cfg_cnp_dscp[5:3]];
  assign job_paused = pfc_paused[j.av.vlan_valid ? j.av.vlan_pcp : j.av.dscp[5:3]];
  assign sel_cnp = s_cnp_valid && !lock_q && !cnp_paused;
  assign m_hdr   = sel_cnp ? cnp_hdr : job_hdr;
  always_comb begin
    job_hdr            = hm_av_hdr(j.av);
    job_hdr.psn        = j.psn + k_q;
    job_hdr.payload_len = 16'(plen);
    case (j.kind)
      HM_RJ_READ: begin
        job_hdr.opcode = (first && last) ? HM_OP_READ_RESP_ONLY : first ? HM_OP_READ_RESP_FIRST : last ? HM_OP_READ_RESP_LAST : HM_OP_READ_RESP_MIDDLE;
        if (first || last) begin
          job_hdr.syndrome = j.syndrome;
          job_hdr.msn      = j.msn;
        end
      end
      HM_RJ_ATOMIC: begin
        job_hdr.opcode      = HM_OP_ATOMIC_ACK;
        job_hdr.syndrome    = j.syndrome;
        job_hdr.msn         = j.msn;
        job_hdr.atomic_orig = j.orig;
      end
      default: begin
        job_hdr.opcode   = HM_OP_ACK;
        job_hdr.syndrome = j.syndrome;
        job_hdr.msn      = j.msn;
      end
    endcase
  end

  // a packet leaves when its header is taken and (with payload) its read is issued; a CNP
  // goes first
  logic need_rd, go, hv_job;
  assign need_rd     = plen != '0;
  assign m_rd.addr   = j.va + 64'(off_q);
  assign m_rd.len    = 32'(plen);
  assign hv_job      = ready_j && (!need_rd || m_rd_ready) && (lock_q || !job_paused);
  assign m_hdr_valid = sel_cnp || hv_job;
  assign s_cnp_ready = !lock_q && !cnp_paused && m_hdr_ready;
  assign m_rd_valid  = !sel_cnp && ready_j && need_rd && m_hdr_ready && (lock_q || !job_paused);
  assign go          = !sel_cnp && hv_job && m_hdr_ready;
  assign j_pop       = go && last;

  always_ff @(posedge clk) begin
    if (rst) begin
      stat_cnps <= '0;
      lock_q    <= 1'b0;
    end else begin
      if (s_cnp_valid && s_cnp_ready) stat_cnps <= stat_cnps + 1'b1;
      lock_q <= !sel_cnp && hv_job && !m_hdr_ready;
    end
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      off_q     <= '0;
      k_q       <= '0;
      stat_pkts <= '0;
    end else if (go) begin
      stat_pkts <= stat_pkts + 1'b1;
      if (last) begin
        off_q <= '0;
        k_q   <= '0;
      end else begin
        off_q <= off_q + 32'(pmtu);
        k_q   <= k_q + 1'b1;
      end
    end
  end

  logic unused_ok;
  assign unused_ok = ^{level, j, s_cnp};
endmodule
