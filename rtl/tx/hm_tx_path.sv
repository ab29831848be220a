// RoCEv2 transmit packet path.
//
// A header record on s_hdr plus payload_len bytes on s_axis (no beats when payload_len is 0)
// become one Ethernet frame (no FCS) on m_axis: Ethernet [+802.1Q] / IPv4 (IHL 5, checksum) or
// IPv6 / UDP (dport 4791) / BTH / extension headers by opcode / payload / pad / ICRC, padded
// with zeros to the 60-byte Ethernet minimum. Lengths, PadCnt and checksums are computed; the
// other record fields go on the wire verbatim (TVer, Resv6 and Resv7 are sent as zero).
//
// Errors: a record with an unknown opcode, or payload on an opcode that carries none, or a
// datagram over 64 KiB, sends nothing; its payload (if payload_len != 0) is consumed up to tlast
// and `stat_bad_req` counts it. A payload stream whose length disagrees with payload_len still
// produces a frame of the announced length (missing bytes are zero, extra beats are discarded
// up to tlast) with m_axis_tuser set on its last beat so the MAC aborts it (`stat_len_err`);
// so does a payload whose last beat carries s_axis_tuser (its bytes came from a failed DMA).
//
// Pipeline (at most ~8 LUT levels per stage):
//   P1..P5  header record preparation, one record per cycle: opcode table and checksum
//           compression, lengths, checksum sum, checksum folds and frame geometry, byte
//           serialisation into the job register
//   A       the assembler: merges header bytes and the payload rotated by the header length,
//           one output beat per cycle, driven by per-beat counters (no wide compares)
//   C1..    a back end that advances as a whole when the output skid buffer has room:
//           C1 ICRC masking, C2 partial XOR sums, C3 CRC register, then removal of the
//           trailing zero bytes of the last beat (multiplication by Z^-k, two bits of k per
//           stage), then ICRC insertion.
module hm_tx_path
  import hm_pkg::*;
  import hm_crc_pkg::*;
#(
  // AXI4-Stream data width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // Bytes per beat (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  input  logic                  rst,

  // Header records
  input  hm_roce_hdr_t          s_hdr_data,
  input  logic                  s_hdr_valid,
  output logic                  s_hdr_ready,

  // Payload, beats packed from lane 0, one packet per record with payload_len != 0
  input  logic [DATA_WIDTH-1:0] s_axis_tdata,
  input  logic [KEEP_WIDTH-1:0] s_axis_tkeep,
  input  logic                  s_axis_tvalid,
  output logic                  s_axis_tready,
  input  logic                  s_axis_tlast,
  input  logic                  s_axis_tuser,   // on the last beat: the payload is bad (DMA error); the frame is aborted

  // Frames to the MAC
  output logic [DATA_WIDTH-1:0] m_axis_tdata,
  output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
  output logic                  m_axis_tvalid,
  input  logic                  m_axis_tready,
  output logic                  m_axis_tlast,
  output logic                  m_axis_tuser,

  // Counters
  output logic [31:0]           stat_frames,
  output logic [31:0]           stat_len_err,
  output logic [31:0]           stat_bad_req
);

  localparam int KW     = KEEP_WIDTH;
  localparam int DW     = DATA_WIDTH;
  localparam int KB     = $clog2(KW);
  localparam int HBEATS = (128 + KW - 1) / KW;
  localparam int HB     = HBEATS * KW;
  localparam int NCORR  = (KB + 1) / 2;  // correction stages, two bits of k each

  function automatic logic [KB:0] keep_bytes(input logic [KW-1:0] keep);
    return (KB+1)'(hm_keep_bytes(128'(keep)));
  endfunction

  // Lanes [0, n) of a beat (n >= KW: all), as lane bits and as data bits: word-level masks,
  // which a simulator evaluates as a few shifts instead of a loop over the lanes.
  function automatic logic [KW-1:0] lanes_below(input logic [KB:0] n);
    return int'(n) >= KW ? '1 : ~({KW{1'b1}} << n);
  endfunction
  function automatic logic [DW-1:0] bytes_below(input logic [KB:0] n);
    return int'(n) >= KW ? '1 : ~({DW{1'b1}} << (8 * int'(n)));
  endfunction

  // min(x, KW) for a non-negative count
  function automatic logic [KB:0] clampw(input logic signed [17:0] x);
    if (x <= 0) return '0;
    if (x >= 18'(KW)) return (KB+1)'(KW);
    return (KB+1)'(x);
  endfunction

  // ----------------------------------------------------------------------------------------
  // Input skid buffers: s_hdr_ready and s_axis_tready are registered.
  // ----------------------------------------------------------------------------------------
  hm_roce_hdr_t  ih_data;
  logic          ih_valid, ih_ready;
  hm_skid #(.WIDTH($bits(hm_roce_hdr_t))) u_hdr_skid (
    .clk, .rst,
    .s_data(s_hdr_data), .s_valid(s_hdr_valid), .s_ready(s_hdr_ready),
    .m_data(ih_data), .m_valid(ih_valid), .m_ready(ih_ready)
  );
  logic [DW-1:0] p_tdata;
  logic [KW-1:0] p_tkeep;
  logic          p_tvalid, p_tready, p_tlast, p_tuser;
  hm_skid #(.WIDTH(DW + KW + 2)) u_pay_skid (
    .clk, .rst,
    .s_data({s_axis_tdata, s_axis_tkeep, s_axis_tlast, s_axis_tuser}), .s_valid(s_axis_tvalid), .s_ready(s_axis_tready),
    .m_data({p_tdata, p_tkeep, p_tlast, p_tuser}), .m_valid(p_tvalid), .m_ready(p_tready)
  );

  // ----------------------------------------------------------------------------------------
  // P1: opcode table, small lengths, static checksum terms compressed to two operands
  // ----------------------------------------------------------------------------------------
  logic          p1_valid, p1_ready;
  hm_roce_hdr_t  p1;
  assign ih_ready = !p1_valid || p1_ready;
  always_ff @(posedge clk) begin
    if (ih_ready) p1 <= ih_data;
    if (rst) p1_valid <= 1'b0;
    else if (ih_ready) p1_valid <= ih_valid;
  end

  hm_op_info_t p1_op;
  logic [1:0]  p1_pad;
  logic [6:0]  p1_small;        // 12 (UDP 8 + ICRC 4) + hdr_len + pad
  logic [39:0] p1_cs;
  logic        p1_bad;
  always_comb begin
    logic [39:0] a, b, c;
    logic [19:0] w0, w1, w2, w3, w4, w5, w6, w7, w8;
    p1_op    = hm_op_info(p1.opcode);
    p1_pad   = 2'(3'd4 - {1'b0, p1.payload_len[1:0]});
    p1_small = 7'd12 + 7'(p1_op.hdr_len) + 7'(p1_pad);
    p1_bad   = !p1_op.known || (p1_op.no_payload && p1.payload_len != 0);
    // IPv4 header words except total length (added in P2); checksum field itself is zero
    w0 = {4'h0, 8'h45, p1.dscp, p1.ecn};
    w1 = {4'h0, p1.ip_id};
    w2 = {4'h0, 1'b0, p1.ip_df, 14'h0};
    w3 = {4'h0, p1.ttl, 8'd17};
    w4 = {4'h0, p1.ip_src[31:16]};
    w5 = {4'h0, p1.ip_src[15:0]};
    w6 = {4'h0, p1.ip_dst[31:16]};
    w7 = {4'h0, p1.ip_dst[15:0]};
    w8 = '0;
    a = hm_csa20(w0, w1, w2);
    b = hm_csa20(w3, w4, w5);
    c = hm_csa20(w6, w7, w8);
    a = hm_csa20(a[39:20], a[19:0], b[39:20]);
    b = hm_csa20(b[19:0], c[39:20], c[19:0]);
    c = hm_csa20(a[39:20], a[19:0], b[39:20]);
    p1_cs = hm_csa20(c[39:20], c[19:0], b[19:0]);
  end

  // ----------------------------------------------------------------------------------------
  // P2: UDP length, IP total length, size check
  // ----------------------------------------------------------------------------------------
  logic          p2_valid, p2_ready;
  hm_roce_hdr_t  p2;
  hm_op_info_t   p2_op;
  logic [1:0]    p2_pad;
  logic [6:0]    p2_small;
  logic [39:0]   p2_cs;
  logic          p2_bad;
  assign p1_ready = !p2_valid || p2_ready;
  always_ff @(posedge clk) begin
    if (p1_ready) begin
      p2 <= p1; p2_op <= p1_op; p2_pad <= p1_pad; p2_small <= p1_small; p2_cs <= p1_cs; p2_bad <= p1_bad;
    end
    if (rst) p2_valid <= 1'b0;
    else if (p1_ready) p2_valid <= p1_valid;
  end

  logic [16:0] p2_udp, p2_tot;
  logic [39:0] p2_cs3;
  logic        p2_bad_all;
  always_comb begin
    p2_udp = 17'(p2.payload_len) + 17'(p2_small);
    p2_tot = 17'(p2.payload_len) + 17'(p2_small) + 17'd20;
    p2_bad_all = p2_bad || (p2.ipv6 ? p2_udp[16] : p2_tot[16]);
    p2_cs3 = hm_csa20(p2_cs[39:20], p2_cs[19:0], {4'h0, p2_tot[15:0]});
  end

  // ----------------------------------------------------------------------------------------
  // P3: checksum sum; frame geometry sums
  // ----------------------------------------------------------------------------------------
  logic          p3_valid, p3_ready;
  hm_roce_hdr_t  p3;
  hm_op_info_t   p3_op;
  logic [1:0]    p3_pad;
  logic [15:0]   p3_udp;
  logic [39:0]   p3_cs;
  logic          p3_bad;
  assign p2_ready = !p3_valid || p3_ready;
  always_ff @(posedge clk) begin
    if (p2_ready) begin
      p3 <= p2; p3_op <= p2_op; p3_pad <= p2_pad; p3_udp <= p2_udp[15:0]; p3_cs <= p2_cs3; p3_bad <= p2_bad_all;
    end
    if (rst) p3_valid <= 1'b0;
    else if (p2_ready) p3_valid <= p2_valid;
  end

  logic [19:0] p3_sum;
  logic [7:0]  p3_h;       // header bytes before the payload
  logic [16:0] p3_e;       // end of the IP datagram (frame length without Ethernet padding)
  logic [16:0] p3_pe;      // end of the payload
  logic [16:0] p3_pic;     // position of the ICRC
  always_comb begin
    logic [7:0] l3l4;
    p3_sum = p3_cs[39:20] + p3_cs[19:0];
    l3l4   = (p3.vlan_valid ? 8'd18 : 8'd14) + (p3.ipv6 ? 8'd40 : 8'd20);
    p3_h   = l3l4 + 8'd8 + 8'(p3_op.hdr_len);
    p3_e   = 17'(l3l4) + 17'(p3_udp);
    p3_pic = 17'(8'(l3l4 - 8'd4)) + 17'(p3_udp);
    p3_pe  = 17'(p3_h) + 17'(p3.payload_len);
  end

  // ----------------------------------------------------------------------------------------
  // P4: checksum folds; per-frame beat geometry
  // ----------------------------------------------------------------------------------------
  logic          p4_valid, p4_ready;
  hm_roce_hdr_t  p4;
  hm_op_info_t   p4_op;
  logic [1:0]    p4_pad;
  logic [15:0]   p4_udp;
  logic [19:0]   p4_sum;
  logic [7:0]    p4_h;
  logic [16:0]   p4_e, p4_pe, p4_pic;
  logic          p4_bad;
  assign p3_ready = !p4_valid || p4_ready;
  always_ff @(posedge clk) begin
    if (p3_ready) begin
      p4 <= p3; p4_op <= p3_op; p4_pad <= p3_pad; p4_udp <= p3_udp; p4_sum <= p3_sum;
      p4_h <= p3_h; p4_e <= p3_e; p4_pe <= p3_pe; p4_pic <= p3_pic; p4_bad <= p3_bad;
    end
    if (rst) p4_valid <= 1'b0;
    else if (p3_ready) p4_valid <= p3_valid;
  end

  // Per-job state of the assembler at beat 0 (and constants for the whole frame).
  typedef struct packed {
    logic [HBEATS-1:0] hsel;       // one-hot header beat (zero past the header)
    logic signed [17:0] hdr_rem;   // header bytes from the beat start on
    logic signed [17:0] pay_rem;   // header + payload bytes from the beat start on
    logic signed [17:0] crc_rem;   // bytes before the ICRC from the beat start on
    logic [KB:0]   hdr_n, pay_n;   // the same, clamped to the beat
    logic [KB:0]   crc_n;          // lanes of this beat before the ICRC
    logic          crc_active;     // the beat holds bytes before the ICRC
    logic          crc_last;       // ... and the last of them
    logic [KB-1:0] kz;             // zero lanes after the last CRC byte in that beat
    logic [15:0]   beats_left;     // output beats left including this one
    logic [15:0]   hb_left;        // beats until the first payload beat
    logic [15:0]   pb_left;        // payload beats still to consume
    logic          need;           // this beat consumes a payload beat
    logic          pay_last;       // ... and it must be the payload's last
    logic          is_last;        // last output beat
  } ast_t;

  typedef struct packed {
    logic [KB-1:0] s;              // lane of the first payload byte
    logic [KB:0]   lastp_n;        // bytes in the payload's last beat
    logic [KB:0]   last_n;         // bytes in the frame's last beat
    logic [15:0]   len;
    logic          vlan, ipv6, bad;
  } ajob_t;

  ast_t  p4_st;
  ajob_t p4_job;
  logic [16:0] p4_f1;
  always_comb begin
    logic [16:0] fl;
    logic [15:0] npb, nb;
    p4_f1 = 17'(p4_sum[15:0]) + 17'(p4_sum[19:16]);
    fl  = (p4_e < 17'd60) ? 17'd60 : p4_e;                // frame length
    nb  = 16'((fl + 17'(KW - 1)) >> KB);
    npb = 16'((17'(p4.payload_len) + 17'(KW - 1)) >> KB);
    p4_st.hsel       = HBEATS'(1);
    p4_st.hdr_rem    = 18'(p4_h);
    p4_st.pay_rem    = 18'(p4_pe);
    p4_st.crc_rem    = 18'(p4_pic);
    p4_st.hdr_n      = clampw(18'(p4_h));
    p4_st.pay_n      = clampw(18'(p4_pe));
    p4_st.crc_n      = clampw(18'(p4_pic));
    p4_st.crc_active = 1'b1;
    p4_st.crc_last   = p4_pic <= 17'(KW);
    p4_st.kz         = KB'(17'(KW) - p4_pic);
    p4_st.beats_left = nb;
    p4_st.hb_left    = 16'(p4_h) >> KB;
    p4_st.pb_left    = npb;
    // direct compares rather than tests on nb/npb (shallower)
    p4_st.need       = p4_h < 8'(KW) && p4.payload_len != 0;
    p4_st.pay_last   = p4.payload_len != 0 && p4.payload_len <= 16'(KW);
    p4_st.is_last    = (KW >= 60) && p4_e <= 17'(KW);
    p4_job.s       = p4_h[KB-1:0];
    p4_job.lastp_n = (p4.payload_len[KB-1:0] == '0) ? (KB+1)'(KW) : (KB+1)'(p4.payload_len[KB-1:0]);
    p4_job.last_n  = (fl[KB-1:0] == '0) ? (KB+1)'(KW) : (KB+1)'(fl[KB-1:0]);
    p4_job.len     = p4.payload_len;
    p4_job.vlan    = p4.vlan_valid;
    p4_job.ipv6    = p4.ipv6;
    p4_job.bad     = p4_bad;
  end

  // ----------------------------------------------------------------------------------------
  // P5: serialise the header bytes
  // ----------------------------------------------------------------------------------------
  logic          p5_valid, p5_ready;
  hm_roce_hdr_t  h2;
  hm_op_info_t   h2_op;
  logic [1:0]    h2_pad;
  logic [15:0]   h2_udp_len;
  logic [16:0]   h2_f1;
  ast_t          p5_st;
  ajob_t         p5_job;
  assign p4_ready = !p5_valid || p5_ready;
  always_ff @(posedge clk) begin
    if (p4_ready) begin
      h2 <= p4; h2_op <= p4_op; h2_pad <= p4_pad; h2_udp_len <= p4_udp; h2_f1 <= p4_f1;
      p5_st <= p4_st; p5_job <= p4_job;
    end
    if (rst) p5_valid <= 1'b0;
    else if (p4_ready) p5_valid <= p4_valid;
  end

  // The header bytes of a frame, serialised (every byte outside a segment zero).
  function automatic logic [HB-1:0][7:0] serialise(input hm_roce_hdr_t h, input hm_op_info_t op,
                                                    input logic [1:0] pad, input logic [15:0] udp_len,
                                                    input logic [16:0] f1);
    logic [17:0][7:0] l2;
    logic [39:0][7:0] l3;
    logic [19:0][7:0] l4;
    logic [27:0][7:0] ext;
    logic [15:0]      tot, csum;
    logic [7:0]       tc, l3off, iphdr;
    logic             unused_in;   // fields the serialiser does not read (carried elsewhere)
    unused_in = ^{op, h.udp_dport, h.udp_len, h.padcnt, h.tver, h.resv6, h.resv7, h.payload_off,
                  h.payload_len};
    l2 = '0; l3 = '0; l4 = '0; ext = '0;
    l3off = h.vlan_valid ? 8'd18 : 8'd14;
    iphdr = h.ipv6 ? 8'd40 : 8'd20;
    for (int i = 0; i < 6; i++) begin
      l2[i]     = h.eth_dst[8*(5-i) +: 8];
      l2[6 + i] = h.eth_src[8*(5-i) +: 8];
    end
    if (h.vlan_valid) begin
      l2[12] = 8'h81; l2[13] = 8'h00;
      l2[14] = {h.vlan_pcp, h.vlan_dei, h.vlan_vid[11:8]};
      l2[15] = h.vlan_vid[7:0];
      l2[16] = h.ipv6 ? 8'h86 : 8'h08; l2[17] = h.ipv6 ? 8'hDD : 8'h00;
    end else begin
      l2[12] = h.ipv6 ? 8'h86 : 8'h08; l2[13] = h.ipv6 ? 8'hDD : 8'h00;
    end
    tc  = {h.dscp, h.ecn};
    tot = udp_len + 16'd20;
    csum = ~(f1[15:0] + 16'(f1[16]));
    if (h.ipv6) begin
      l3[0] = {4'h6, tc[7:4]};
      l3[1] = {tc[3:0], h.flow_label[19:16]};
      l3[2] = h.flow_label[15:8];
      l3[3] = h.flow_label[7:0];
      l3[4] = udp_len[15:8]; l3[5] = udp_len[7:0];
      l3[6] = 8'd17; l3[7] = h.ttl;
      for (int i = 0; i < 16; i++) begin
        l3[8 + i]  = h.ip_src[8*(15-i) +: 8];
        l3[24 + i] = h.ip_dst[8*(15-i) +: 8];
      end
    end else begin
      l3[0] = 8'h45; l3[1] = tc;
      l3[2] = tot[15:8]; l3[3] = tot[7:0];
      l3[4] = h.ip_id[15:8]; l3[5] = h.ip_id[7:0];
      l3[6] = {1'b0, h.ip_df, 6'h0}; l3[7] = 8'h00;
      l3[8] = h.ttl; l3[9] = 8'd17;
      l3[10] = csum[15:8]; l3[11] = csum[7:0];
      for (int i = 0; i < 4; i++) begin
        l3[12 + i] = h.ip_src[8*(3-i) +: 8];
        l3[16 + i] = h.ip_dst[8*(3-i) +: 8];
      end
    end
    l4[0] = h.udp_sport[15:8]; l4[1] = h.udp_sport[7:0];
    l4[2] = HM_ROCE_UDP_PORT[15:8]; l4[3] = HM_ROCE_UDP_PORT[7:0];
    l4[4] = udp_len[15:8]; l4[5] = udp_len[7:0];
    l4[6] = h.udp_csum[15:8]; l4[7] = h.udp_csum[7:0];
    l4[8] = h.opcode;
    l4[9] = {h.se, h.migreq, pad, 4'h0};
    l4[10] = h.pkey[15:8]; l4[11] = h.pkey[7:0];
    l4[12] = {h.fecn, h.becn, 6'h0};
    l4[13] = h.dest_qp[23:16]; l4[14] = h.dest_qp[15:8]; l4[15] = h.dest_qp[7:0];
    l4[16] = {h.ackreq, 7'h0};
    l4[17] = h.psn[23:16]; l4[18] = h.psn[15:8]; l4[19] = h.psn[7:0];
    if (op.reth || op.atomic_eth) begin
      for (int i = 0; i < 8; i++) ext[i] = h.va[8*(7-i) +: 8];
      for (int i = 0; i < 4; i++) ext[8 + i] = h.rkey[8*(3-i) +: 8];
    end
    if (op.reth) for (int i = 0; i < 4; i++) ext[12 + i] = h.dma_len[8*(3-i) +: 8];
    if (op.atomic_eth) begin
      for (int i = 0; i < 8; i++) begin
        ext[12 + i] = h.swap_add[8*(7-i) +: 8];
        ext[20 + i] = h.compare[8*(7-i) +: 8];
      end
    end
    if (op.aeth) begin
      ext[0] = h.syndrome;
      for (int i = 0; i < 3; i++) ext[1 + i] = h.msn[8*(2-i) +: 8];
    end
    if (op.atomic_ack) for (int i = 0; i < 8; i++) ext[4 + i] = h.atomic_orig[8*(7-i) +: 8];
    if (op.deth) begin
      for (int i = 0; i < 4; i++) ext[i] = h.qkey[8*(3-i) +: 8];
      for (int i = 0; i < 3; i++) ext[5 + i] = h.src_qp[8*(2-i) +: 8];
    end
    if (op.ieth) for (int i = 0; i < 4; i++) ext[i] = h.imm[8*(3-i) +: 8];
    if (op.imm) for (int i = 0; i < 4; i++) ext[int'(op.imm_off) + i] = h.imm[8*(3-i) +: 8];

    // Segments at their offsets; every byte outside a segment is zero, so OR places them.
    return (HB*8)'(l2)
        | ((HB*8)'(l3) << (8 * l3off))
        | ((HB*8)'(l4) << (8 * (l3off + iphdr)))
        | ((HB*8)'(ext) << (8 * (l3off + iphdr + 8'd20)));
  endfunction

  // Job register: one prepared frame waiting for the assembler.
  logic               j_valid, j_take;
  logic [HB-1:0][7:0] j_hdr;
  ast_t               j_st;
  ajob_t              j_job;

  assign p5_ready = !j_valid || j_take;
  always_ff @(posedge clk) begin
    // the header is serialised only for a frame that moves (j_hdr is used only with j_valid)
    if (p5_ready && p5_valid) j_hdr <= serialise(h2, h2_op, h2_pad, h2_udp_len, h2_f1);
    if (p5_ready) begin
      j_st  <= p5_st;
      j_job <= p5_job;
    end
    if (rst) j_valid <= 1'b0;
    else if (p5_ready) j_valid <= p5_valid;
  end

  // ----------------------------------------------------------------------------------------
  // Assembler
  // ----------------------------------------------------------------------------------------
  logic               adv;           // back end advances this cycle
  logic               a_busy_q, a_drain_q, a_short_q, a_err_q, a_nd_q;
  logic [HB-1:0][7:0] a_hdr_q;
  ast_t               a_st_q;
  ajob_t              a_job_q;
  logic [KW-1:0][7:0] a_held_q;

  logic [HB-1:0][7:0] c_hdr;
  ast_t               cs, ns;        // state of this beat, and of the next
  ajob_t              cj;
  logic               c_short, c_err, need_cur;
  logic               emit, drain_beat, take_bad, finish;
  logic [KW-1:0][7:0] rot_cur;
  logic [2*DW-1:0]    rot2;
  logic               a_err_now, a_short_next, a_drain_next;
  logic [KB:0]        cur_n;

  // A beat of the frame: header lanes, then payload lanes (below lane s the previous payload
  // beat's bytes), then zeros. Assembled only for a beat that moves (in C1's enable).
  function automatic logic [KW-1:0][7:0] assemble(input logic [HB-1:0][7:0] hdr,
                                                   input logic [HBEATS-1:0] hsel,
                                                   input logic [KB:0] hdr_n, input logic [KB:0] pay_n,
                                                   input logic [KW-1:0][7:0] held,
                                                   input logic [KW-1:0][7:0] rot,
                                                   input logic [KB-1:0] sh);
    logic [KW-1:0][7:0] hdr_cur;
    hdr_cur = '0;
    for (int h = 0; h < HBEATS; h++) if (hsel[h]) hdr_cur = hdr[h*KW +: KW];
    return (hdr_cur & bytes_below(hdr_n)) |
           (((held & bytes_below((KB+1)'(sh))) | (rot & ~bytes_below((KB+1)'(sh)))) &
            bytes_below(pay_n) & ~bytes_below(hdr_n));
  endfunction

  always_comb begin
    c_hdr   = a_busy_q ? a_hdr_q : j_hdr;
    cs      = a_busy_q ? a_st_q  : j_st;
    cj      = a_busy_q ? a_job_q : j_job;
    c_short = a_busy_q ? a_short_q : 1'b0;
    c_err   = a_busy_q ? a_err_q   : 1'b0;

    cur_n    = keep_bytes(p_tkeep);
    need_cur = cs.need && !c_short;
    // rotate the payload beat up by s lanes: lane l = payload byte (l - s) mod KW
    // only a payload beat that is there and needed is rotated
    rot2     = '0;
    if (need_cur && p_tvalid) rot2 = {p_tdata, p_tdata} >> (8 * (16'(KW) - 16'(cj.s)));
    rot_cur  = rot2[DW-1:0];

    drain_beat = a_drain_q && p_tvalid;                                 // discarding extra beats
    take_bad   = !a_drain_q && !a_busy_q && j_valid && j_job.bad;        // rejected record
    emit       = !a_drain_q && (a_busy_q || (j_valid && !j_job.bad)) && (!need_cur || p_tvalid);
    finish     = emit && cs.is_last;

    // length checks on the consumed payload beat
    a_err_now = 1'b0; a_short_next = c_short; a_drain_next = 1'b0;
    if (emit && need_cur) begin
      if (cs.pay_last) begin
        if (!p_tlast) begin a_err_now = 1'b1; a_drain_next = 1'b1; end
        else if (cur_n != cj.lastp_n || p_tuser) a_err_now = 1'b1;
      end else if (p_tlast) begin
        a_err_now = 1'b1; a_short_next = 1'b1;
      end
    end


    // next beat's state
    ns            = cs;
    ns.hsel       = cs.hsel << 1;
    ns.hdr_rem    = cs.hdr_rem - 18'(KW);
    ns.pay_rem    = cs.pay_rem - 18'(KW);
    ns.crc_rem    = cs.crc_rem - 18'(KW);
    ns.hdr_n      = clampw(cs.hdr_rem - 18'(KW));
    ns.pay_n      = clampw(cs.pay_rem - 18'(KW));
    ns.crc_n      = clampw(cs.crc_rem - 18'(KW));
    ns.crc_active = cs.crc_rem > 18'(KW);
    ns.crc_last   = cs.crc_rem > 18'(KW) && cs.crc_rem <= 18'(2 * KW);
    ns.kz         = KB'(18'(2 * KW) - cs.crc_rem);
    ns.beats_left = cs.beats_left - 16'd1;
    ns.is_last    = cs.beats_left == 16'd2;
    ns.hb_left    = (cs.hb_left != 0) ? cs.hb_left - 16'd1 : 16'd0;
    ns.pb_left    = (a_short_next) ? 16'd0 : (cs.need ? cs.pb_left - 16'd1 : cs.pb_left);
    ns.need       = (cs.hb_left <= 16'd1) && ns.pb_left != 0;
    ns.pay_last   = ns.pb_left == 16'd1;
  end

  assign j_take  = adv && ((!a_busy_q && !a_drain_q && j_valid && !j_job.bad && emit) || take_bad);
  assign p_tready = adv && ((emit && need_cur) || drain_beat);

  always_ff @(posedge clk) begin
    if (rst) begin
      a_busy_q  <= 1'b0;
      a_drain_q <= 1'b0;
      stat_bad_req <= '0;
    end else if (adv) begin
      if (take_bad) begin
        stat_bad_req <= stat_bad_req + 1'b1;
        a_drain_q <= j_job.len != 0;
      end else if (drain_beat && p_tlast) begin
        a_drain_q <= 1'b0;
      end
      if (emit) begin
        a_busy_q  <= !finish;
        a_hdr_q   <= c_hdr;
        a_st_q    <= ns;
        a_job_q   <= cj;
        a_short_q <= a_short_next;
        a_err_q   <= c_err | a_err_now;
        a_held_q  <= rot_cur;
        a_nd_q    <= (a_busy_q && a_nd_q) | a_drain_next;
        if (finish && ((a_busy_q && a_nd_q) || a_drain_next)) a_drain_q <= 1'b1;
      end
    end
  end

  // ----------------------------------------------------------------------------------------
  // Back end. Templates of ICRC masks over the first HB bytes, per (vlan, ipv6), as in RX.
  // ----------------------------------------------------------------------------------------
  localparam logic [3:0][8*HM_TPL_BYTES-1:0] TKEEP = hm_icrc_byte_masks(1'b0);
  localparam logic [3:0][8*HM_TPL_BYTES-1:0] TSET  = hm_icrc_byte_masks(1'b1);
  if (HB != HM_TPL_BYTES) begin : g_bad_tpl
    $error("hm_tx_path: the header window must be {HM_TPL_BYTES} bytes (DATA_WIDTH 256..1024)");
  end
  localparam logic [31:0] FIRST_C14 = hm_crc_zpow(HM_ICRC_SEED, KW - 14);
  localparam logic [31:0] FIRST_C18 = hm_crc_zpow(HM_ICRC_SEED, KW - 18);
  localparam logic [31:0][31:0] ZW = hm_crc_zpow_matrix(KW);

  function automatic logic [NCORR*4-1:0][31:0][31:0] corr_matrices();
    logic [NCORR*4-1:0][31:0][31:0] m;
    for (int s = 0; s < NCORR; s++)
      for (int v = 0; v < 4; v++)
        m[s*4 + v] = hm_crc_zpow_matrix(-(v << (2 * s)));
    return m;
  endfunction
  localparam logic [NCORR*4-1:0][31:0][31:0] CORR = corr_matrices();

  // Sideband carried with each beat through the back end.
  typedef struct packed {
    logic                  valid;
    logic                  last;
    logic                  err;
    logic [KB:0]           nbytes;
    logic signed [KB+2:0]  ic_rel;  // ICRC position minus beat start, clamped to [-4, KW]
  } side_t;

  side_t a_side;
  always_comb begin
    a_side.valid  = emit;
    a_side.last   = finish;
    a_side.err    = c_err | a_err_now;
    a_side.nbytes = cs.is_last ? cj.last_n : (KB+1)'(KW);
    if (cs.crc_rem < -18'sd4)       a_side.ic_rel = -(KB+3)'(4);
    else if (cs.crc_rem > 18'(KW))  a_side.ic_rel = (KB+3)'(KW);
    else                            a_side.ic_rel = (KB+3)'(cs.crc_rem);
  end

  // C1: the assembled beat and what the CRC needs of it
  side_t              c1_side;
  logic [KW-1:0][7:0] c1_data, c1_masked;
  logic               c1_first, c1_vlan, c1_ipv6;
  logic [HBEATS-1:0]  c1_hsel;
  logic [KB:0]        c1_crc_n;
  logic               c1_active, c1_crclast;
  logic [KB-1:0]      c1_kz;
  always_ff @(posedge clk) begin
    if (adv && emit) c1_data <= assemble(c_hdr, cs.hsel, cs.hdr_n, cs.pay_n, a_held_q, rot_cur, cj.s);
    if (adv) begin
      c1_first <= !a_busy_q;
      c1_vlan <= cj.vlan; c1_ipv6 <= cj.ipv6;
      c1_hsel <= cs.hsel;
      c1_crc_n <= cs.crc_n; c1_active <= cs.crc_active; c1_crclast <= cs.crc_last; c1_kz <= cs.kz;
    end
    if (rst) c1_side <= '0;
    else if (adv) c1_side <= a_side;
  end

  // header beats masked by their template; lanes at or after the ICRC zero
  logic [DW-1:0] c1_keep, c1_set;
  always_comb begin
    c1_keep = '1;
    c1_set  = '0;
    for (int h = 0; h < HBEATS; h++)
      if (c1_hsel[h]) begin
        c1_keep = TKEEP[{c1_vlan, c1_ipv6}][h*DW +: DW];
        c1_set  = TSET[{c1_vlan, c1_ipv6}][h*DW +: DW];
      end
    c1_masked = ((c1_data & c1_keep) | c1_set) & bytes_below(c1_crc_n);
  end

  // C2
  localparam int PARTS = KW / 16;
  logic [PARTS-1:0][31:0] c2_part;
  hm_crc32_fold #(.DATA_BYTES(KW), .PARTS(PARTS)) u_fold (
    .clk, .en(adv && c1_side.valid), .data(c1_masked), .part_q(c2_part)
  );
  side_t              c2_side;
  logic [KW-1:0][7:0] c2_data;
  logic               c2_first, c2_active, c2_crclast, c2_vlan;
  logic [KB-1:0]      c2_kz;
  always_ff @(posedge clk) begin
    if (adv) begin
      c2_data <= c1_data; c2_first <= c1_first; c2_active <= c1_active;
      c2_crclast <= c1_crclast; c2_kz <= c1_kz; c2_vlan <= c1_vlan;
    end
    if (rst) c2_side <= '0;
    else if (adv) c2_side <= c1_side;
  end

  // C3: CRC register
  logic [31:0] crc_q, crc_new;
  always_comb begin
    logic [31:0] fold;
    fold = '0;
    for (int p = 0; p < PARTS; p++) fold = fold ^ c2_part[p];
    if (c2_first) crc_new = (c2_vlan ? FIRST_C18 : FIRST_C14) ^ fold;
    else          crc_new = hm_crc_matvec(ZW, crc_q) ^ fold;
  end
  always_ff @(posedge clk) if (adv && c2_side.valid && c2_active) crc_q <= crc_new;

  // C3..C(3+NCORR): correction pipeline, carried with the beats
  side_t              cs_side [NCORR+1];
  logic [KW-1:0][7:0] cs_data [NCORR+1];
  logic [31:0]        cs_x    [NCORR+1];
  logic [KB-1:0]      cs_kz   [NCORR+1];
  logic               cs_cl   [NCORR+1];

  always_ff @(posedge clk) begin
    // The correction runs only with the ICRC's last beat (cl), the only one whose value is
    // used downstream: a simulator skips the matrix products otherwise. The data and kz
    // delay lines move with adv alone (one enable: shift-register LUTs in synthesis).
    if (adv) begin
      cs_data[0] <= c2_data; cs_kz[0] <= c2_kz;
      if (c2_side.valid && c2_crclast) cs_x[0] <= crc_new;
      cs_cl[0] <= c2_side.valid && c2_crclast;
      for (int s = 0; s < NCORR; s++) begin
        logic [1:0] bits;
        bits = 2'({26'h0, cs_kz[s]} >> (2 * s));
        cs_data[s+1] <= cs_data[s];
        if (cs_cl[s]) cs_x[s+1] <= hm_crc_matvec(CORR[s*4 + int'(bits)], cs_x[s]);
        cs_kz[s+1]   <= cs_kz[s];
        cs_cl[s+1]   <= cs_cl[s];
      end
    end
    if (rst) begin
      for (int s = 0; s <= NCORR; s++) cs_side[s] <= '0;
    end else if (adv) begin
      cs_side[0] <= c2_side;
      for (int s = 0; s < NCORR; s++) cs_side[s+1] <= cs_side[s];
    end
  end

  // ICRC insertion: byte d of the ICRC goes to lane ic_rel + d
  logic [31:0]        icrc_now, icrc_hold_q;
  logic [KW-1:0][7:0] ins_data;
  // 4 bytes at lanes pos .. pos+3 of a beat, pos in [-4, KW] (lanes outside the beat dropped)
  function automatic logic [DW-1:0] word_at(input logic [31:0] v, input int pos);
    return DW'(((DW+32)'(v) << (8 * (pos + 4))) >> 32);
  endfunction
  side_t              fin;
  always_comb begin
    fin      = cs_side[NCORR];
    icrc_now = cs_cl[NCORR] ? ~cs_x[NCORR] : icrc_hold_q;
    // the ICRC's 4 bytes at lanes ic_rel .. ic_rel+3 (ic_rel in [-4, KW]: negative when the
    // ICRC began in the previous beat), as one shift in a window 4 bytes wider than the beat
    ins_data = (cs_data[NCORR] & ~word_at(32'hFFFF_FFFF, int'(fin.ic_rel))) |
               word_at(icrc_now, int'(fin.ic_rel));
  end
  always_ff @(posedge clk) if (adv && cs_cl[NCORR]) icrc_hold_q <= ~cs_x[NCORR];

  // Output skid
  localparam int OW = DW + KW + 2;
  logic [OW-1:0] o_pack, m_pack;
  logic [KW-1:0] o_keep;
  always_comb begin
    o_keep = lanes_below(fin.nbytes);
    o_pack = {ins_data, o_keep, fin.last, fin.last && fin.err};
  end
  hm_skid #(.WIDTH(OW)) u_out_skid (
    .clk, .rst,
    .s_data(o_pack), .s_valid(fin.valid), .s_ready(adv),
    .m_data(m_pack), .m_valid(m_axis_tvalid), .m_ready(m_axis_tready)
  );
  assign {m_axis_tdata, m_axis_tkeep, m_axis_tlast, m_axis_tuser} = m_pack;

  always_ff @(posedge clk) begin
    if (rst) begin
      stat_frames  <= '0;
      stat_len_err <= '0;
    end else if (adv && fin.valid && fin.last) begin
      stat_frames <= stat_frames + 1'b1;
      if (fin.err) stat_len_err <= stat_len_err + 1'b1;
    end
  end

  logic unused_ok;
  assign unused_ok = ^{rot2[2*DW-1:DW], p2_op, p3_op, p4_op, p4_udp};

  // Elaboration-time parameter check
  if (DATA_WIDTH < 256 || DATA_WIDTH % 8 != 0) begin : g_bad_width
    $error("hm_tx_path: DATA_WIDTH must be a multiple of 8 and at least 256");
  end

endmodule
