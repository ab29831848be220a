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
// up to tlast) with m_axis_tuser set on its last beat so the MAC aborts it (`stat_len_err`).
//
// Pipeline: H1/H2 header record preparation (lengths, checksum, byte serialisation), the
// assembler that merges header bytes and the payload shifted by the header length, then a
// six-stage back end that advances as a whole when the output skid buffer has room:
// C1 ICRC masking, C2 partial XOR sums, C3 CRC register, C4-C6 removal of the trailing zero
// bytes of the last beat (multiplication by Z^-k, two bits of k per stage), then ICRC insertion.
module hm_tx_path
  import hm_pkg::*;
  import hm_crc_pkg::*;
#(
  // AXI4-Stream data width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // Bytes per beat.
  parameter int KEEP_WIDTH = DATA_WIDTH / 8
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
    logic [KB:0] n;
    n = '0;
    for (int i = 0; i < KW; i++) if (keep[i]) n = (KB+1)'(i + 1);
    return n;
  endfunction

  // ----------------------------------------------------------------------------------------
  // H1: record register and length/checksum arithmetic
  // ----------------------------------------------------------------------------------------
  // Input skid buffers: s_hdr_ready and s_axis_tready are registered.
  hm_roce_hdr_t  ih_data;
  logic          ih_valid, ih_ready;
  hm_skid #(.WIDTH($bits(hm_roce_hdr_t))) u_hdr_skid (
    .clk, .rst,
    .s_data(s_hdr_data), .s_valid(s_hdr_valid), .s_ready(s_hdr_ready),
    .m_data(ih_data), .m_valid(ih_valid), .m_ready(ih_ready)
  );
  logic [DW-1:0] p_tdata;
  logic [KW-1:0] p_tkeep;
  logic          p_tvalid, p_tready, p_tlast;
  hm_skid #(.WIDTH(DW + KW + 1)) u_pay_skid (
    .clk, .rst,
    .s_data({s_axis_tdata, s_axis_tkeep, s_axis_tlast}), .s_valid(s_axis_tvalid), .s_ready(s_axis_tready),
    .m_data({p_tdata, p_tkeep, p_tlast}), .m_valid(p_tvalid), .m_ready(p_tready)
  );

  logic          h1_valid, h1_ready;
  hm_roce_hdr_t  h1;
  assign ih_ready = !h1_valid || h1_ready;

  always_ff @(posedge clk) begin
    if (ih_ready) h1 <= ih_data;
    if (rst) h1_valid <= 1'b0;
    else if (ih_ready) h1_valid <= ih_valid;
  end

  hm_op_info_t   h1_op;
  logic [1:0]    h1_pad;
  logic [16:0]   h1_udp_len;
  logic [7:0]    h1_l3off, h1_iphdr;
  logic [19:0]   h1_csum;
  logic          h1_bad;
  always_comb begin
    logic [16:0] tot;
    h1_op      = hm_op_info(h1.opcode);
    h1_pad     = 2'(3'd4 - {1'b0, h1.payload_len[1:0]});
    h1_udp_len = 17'd12 + 17'(h1_op.hdr_len) + 17'(h1.payload_len) + 17'(h1_pad);
    h1_l3off   = h1.vlan_valid ? 8'd18 : 8'd14;
    h1_iphdr   = h1.ipv6 ? 8'd40 : 8'd20;
    tot        = h1_udp_len + 17'd20;
    h1_bad     = !h1_op.known || (h1_op.no_payload && h1.payload_len != 0) ||
                 (h1.ipv6 ? h1_udp_len[16] : tot[16]);
    h1_csum    = 20'h04500 + {12'h0, h1.dscp, h1.ecn} + {4'h0, tot[15:0]} + {4'h0, h1.ip_id} +
                 {4'h0, 1'b0, h1.ip_df, 14'h0} + {4'h0, h1.ttl, 8'd17} +
                 {4'h0, h1.ip_src[31:16]} + {4'h0, h1.ip_src[15:0]} +
                 {4'h0, h1.ip_dst[31:16]} + {4'h0, h1.ip_dst[15:0]};
  end

  // ----------------------------------------------------------------------------------------
  // H2: serialise the header bytes
  // ----------------------------------------------------------------------------------------
  logic          h2_valid, h2_ready;
  hm_roce_hdr_t  h2;
  hm_op_info_t   h2_op;
  logic [1:0]    h2_pad;
  logic [15:0]   h2_udp_len;
  logic [7:0]    h2_l3off, h2_iphdr;
  logic [19:0]   h2_csum;
  logic          h2_bad;

  assign h1_ready = !h2_valid || h2_ready;
  always_ff @(posedge clk) begin
    if (h1_ready) begin
      h2 <= h1; h2_op <= h1_op; h2_pad <= h1_pad; h2_udp_len <= h1_udp_len[15:0];
      h2_l3off <= h1_l3off; h2_iphdr <= h1_iphdr; h2_csum <= h1_csum; h2_bad <= h1_bad;
    end
    if (rst) h2_valid <= 1'b0;
    else if (h1_ready) h2_valid <= h1_valid;
  end

  logic [HB-1:0][7:0] ser;
  logic [3:0]         f2_unused;
  logic [15:0]        ser_h, ser_e;
  always_comb begin
    logic [17:0][7:0] l2;
    logic [39:0][7:0] l3;
    logic [19:0][7:0] l4;
    logic [27:0][7:0] ext;
    logic [19:0]      f1, f2;
    logic [15:0]      csum, tot;
    logic [7:0]       tc;
    l2 = '0; l3 = '0; l4 = '0; ext = '0;
    for (int i = 0; i < 6; i++) begin
      l2[i]     = h2.eth_dst[8*(5-i) +: 8];
      l2[6 + i] = h2.eth_src[8*(5-i) +: 8];
    end
    if (h2.vlan_valid) begin
      l2[12] = 8'h81; l2[13] = 8'h00;
      l2[14] = {h2.vlan_pcp, h2.vlan_dei, h2.vlan_vid[11:8]};
      l2[15] = h2.vlan_vid[7:0];
      l2[16] = h2.ipv6 ? 8'h86 : 8'h08; l2[17] = h2.ipv6 ? 8'hDD : 8'h00;
    end else begin
      l2[12] = h2.ipv6 ? 8'h86 : 8'h08; l2[13] = h2.ipv6 ? 8'hDD : 8'h00;
    end
    tc  = {h2.dscp, h2.ecn};
    tot = h2_udp_len + 16'd20;
    f1  = {4'h0, h2_csum[15:0]} + {16'h0, h2_csum[19:16]};
    f2  = {4'h0, f1[15:0]} + {16'h0, f1[19:16]};
    csum = ~f2[15:0];
    f2_unused = f2[19:16];
    if (h2.ipv6) begin
      l3[0] = {4'h6, tc[7:4]};
      l3[1] = {tc[3:0], h2.flow_label[19:16]};
      l3[2] = h2.flow_label[15:8];
      l3[3] = h2.flow_label[7:0];
      l3[4] = h2_udp_len[15:8]; l3[5] = h2_udp_len[7:0];
      l3[6] = 8'd17; l3[7] = h2.ttl;
      for (int i = 0; i < 16; i++) begin
        l3[8 + i]  = h2.ip_src[8*(15-i) +: 8];
        l3[24 + i] = h2.ip_dst[8*(15-i) +: 8];
      end
    end else begin
      l3[0] = 8'h45; l3[1] = tc;
      l3[2] = tot[15:8]; l3[3] = tot[7:0];
      l3[4] = h2.ip_id[15:8]; l3[5] = h2.ip_id[7:0];
      l3[6] = {1'b0, h2.ip_df, 6'h0}; l3[7] = 8'h00;
      l3[8] = h2.ttl; l3[9] = 8'd17;
      l3[10] = csum[15:8]; l3[11] = csum[7:0];
      for (int i = 0; i < 4; i++) begin
        l3[12 + i] = h2.ip_src[8*(3-i) +: 8];
        l3[16 + i] = h2.ip_dst[8*(3-i) +: 8];
      end
    end
    l4[0] = h2.udp_sport[15:8]; l4[1] = h2.udp_sport[7:0];
    l4[2] = HM_ROCE_UDP_PORT[15:8]; l4[3] = HM_ROCE_UDP_PORT[7:0];
    l4[4] = h2_udp_len[15:8]; l4[5] = h2_udp_len[7:0];
    l4[6] = h2.udp_csum[15:8]; l4[7] = h2.udp_csum[7:0];
    l4[8] = h2.opcode;
    l4[9] = {h2.se, h2.migreq, h2_pad, 4'h0};
    l4[10] = h2.pkey[15:8]; l4[11] = h2.pkey[7:0];
    l4[12] = {h2.fecn, h2.becn, 6'h0};
    l4[13] = h2.dest_qp[23:16]; l4[14] = h2.dest_qp[15:8]; l4[15] = h2.dest_qp[7:0];
    l4[16] = {h2.ackreq, 7'h0};
    l4[17] = h2.psn[23:16]; l4[18] = h2.psn[15:8]; l4[19] = h2.psn[7:0];
    if (h2_op.reth || h2_op.atomic_eth) begin
      for (int i = 0; i < 8; i++) ext[i] = h2.va[8*(7-i) +: 8];
      for (int i = 0; i < 4; i++) ext[8 + i] = h2.rkey[8*(3-i) +: 8];
    end
    if (h2_op.reth) for (int i = 0; i < 4; i++) ext[12 + i] = h2.dma_len[8*(3-i) +: 8];
    if (h2_op.atomic_eth) begin
      for (int i = 0; i < 8; i++) begin
        ext[12 + i] = h2.swap_add[8*(7-i) +: 8];
        ext[20 + i] = h2.compare[8*(7-i) +: 8];
      end
    end
    if (h2_op.aeth) begin
      ext[0] = h2.syndrome;
      for (int i = 0; i < 3; i++) ext[1 + i] = h2.msn[8*(2-i) +: 8];
    end
    if (h2_op.atomic_ack) for (int i = 0; i < 8; i++) ext[4 + i] = h2.atomic_orig[8*(7-i) +: 8];
    if (h2_op.deth) begin
      for (int i = 0; i < 4; i++) ext[i] = h2.qkey[8*(3-i) +: 8];
      for (int i = 0; i < 3; i++) ext[5 + i] = h2.src_qp[8*(2-i) +: 8];
    end
    if (h2_op.ieth) for (int i = 0; i < 4; i++) ext[i] = h2.imm[8*(3-i) +: 8];
    if (h2_op.imm) for (int i = 0; i < 4; i++) ext[int'(h2_op.imm_off) + i] = h2.imm[8*(3-i) +: 8];

    ser = (HB*8)'(l2)
        | ((HB*8)'(l3) << (8 * h2_l3off))
        | ((HB*8)'(l4) << (8 * (h2_l3off + h2_iphdr)))
        | ((HB*8)'(ext) << (8 * (h2_l3off + h2_iphdr + 8'd20)));
    // Mask bytes beyond the header (ext beyond hdr_len is zero already; l2 bytes 14..17
    // without VLAN are overwritten by l3 via OR only if zero, which they are).
    ser_h = 16'(h2_l3off) + 16'(h2_iphdr) + 16'd8 + 16'(h2_op.hdr_len);
    ser_e = 16'(h2_l3off) + 16'(h2_iphdr) + h2_udp_len;
  end

  // Job register: one prepared frame waiting for the assembler.
  logic               j_valid, j_take;
  logic [HB-1:0][7:0] j_hdr;
  logic [15:0]        j_h, j_e, j_len, j_npb, j_nb;
  logic               j_bad, j_vlan, j_ipv6;

  assign h2_ready = !j_valid || j_take;
  always_ff @(posedge clk) begin
    if (h2_ready) begin
      j_hdr  <= ser;
      j_h    <= ser_h;
      j_e    <= ser_e;
      j_len  <= h2.payload_len;
      j_npb  <= (h2.payload_len + 16'(KW - 1)) >> KB;
      j_nb   <= ((ser_e < 16'd60 ? 16'd60 : ser_e) + 16'(KW - 1)) >> KB;
      j_bad  <= h2_bad;
      j_vlan <= h2.vlan_valid;
      j_ipv6 <= h2.ipv6;
    end
    if (rst) j_valid <= 1'b0;
    else if (h2_ready) j_valid <= h2_valid;
  end

  // ----------------------------------------------------------------------------------------
  // Assembler
  // ----------------------------------------------------------------------------------------
  logic               adv;           // back end advances this cycle
  logic               a_busy_q, a_drain_q, a_short_q, a_err_q, a_nd_q;
  logic [HB-1:0][7:0] a_hdr_q;
  logic [15:0]        a_h_q, a_e_q, a_len_q, a_npb_q, a_nb_q, a_k_q;
  logic               a_vlan_q, a_ipv6_q;
  logic [KW-1:0][7:0] a_held_q;

  // current job view
  logic [HB-1:0][7:0] c_hdr;
  logic [15:0]        c_h, c_e, c_len, c_npb, c_nb, c_k, c_j, c_hb;
  logic [KB-1:0]      c_s;
  logic               c_vlan, c_ipv6, c_short, c_err;
  logic               need_cur, emit, drain_beat, take_bad, finish;
  logic [KW-1:0][7:0] rot_cur, a_beat;
  logic [2*DW-1:0]    rot2;
  logic               a_err_now, a_short_next, a_drain_next;
  logic [KB:0]        cur_n;

  always_comb begin
    c_hdr  = a_busy_q ? a_hdr_q  : j_hdr;
    c_h    = a_busy_q ? a_h_q    : j_h;
    c_e    = a_busy_q ? a_e_q    : j_e;
    c_len  = a_busy_q ? a_len_q  : j_len;
    c_npb  = a_busy_q ? a_npb_q  : j_npb;
    c_nb   = a_busy_q ? a_nb_q   : j_nb;
    c_k    = a_busy_q ? a_k_q    : 16'd0;
    c_vlan = a_busy_q ? a_vlan_q : j_vlan;
    c_ipv6 = a_busy_q ? a_ipv6_q : j_ipv6;
    c_short = a_busy_q ? a_short_q : 1'b0;
    c_err   = a_busy_q ? a_err_q   : 1'b0;
    c_s    = c_h[KB-1:0];
    c_hb   = c_h >> KB;
    c_j    = c_k - c_hb;

    cur_n    = keep_bytes(p_tkeep);
    need_cur = (c_k >= c_hb) && (c_j < c_npb) && !c_short;
    // rotate the payload beat up by s lanes: lane l = payload byte (l - s) mod KW
    rot2     = {p_tdata, p_tdata} >> (8 * (16'(KW) - 16'(c_s)));
    rot_cur  = rot2[DW-1:0];
    if (!need_cur) rot_cur = '0;

    drain_beat = a_drain_q && p_tvalid;                          // discarding extra beats
    take_bad   = !a_drain_q && !a_busy_q && j_valid && j_bad;          // rejected record
    emit       = !a_drain_q && (a_busy_q || (j_valid && !j_bad)) && (!need_cur || p_tvalid);

    // length checks on the consumed payload beat
    a_err_now = 1'b0; a_short_next = c_short; a_drain_next = 1'b0;
    if (emit && need_cur) begin
      if (c_j == c_npb - 1'b1) begin
        if (!p_tlast) begin a_err_now = 1'b1; a_drain_next = 1'b1; end
        else if (16'(cur_n) != c_len - (c_j << KB)) a_err_now = 1'b1;
      end else if (p_tlast) begin
        a_err_now = 1'b1; a_short_next = 1'b1;
      end
    end

    // beat assembly
    for (int l = 0; l < KW; l++) begin
      logic [15:0] p;
      p = (c_k << KB) + 16'(l);
      a_beat[l] = 8'h00;
      if (p < c_h) begin
        for (int h = 0; h < HBEATS; h++) if (c_k == 16'(h)) a_beat[l] = c_hdr[h*KW + l];
      end else if (p < c_h + c_len) begin
        a_beat[l] = (l < int'(c_s)) ? a_held_q[l] : rot_cur[l];
      end
    end
    finish = emit && (c_k + 1'b1 == c_nb);
  end

  assign j_take = adv && ((!a_busy_q && !a_drain_q && j_valid && !j_bad && emit) || take_bad);
  assign p_tready = adv && ((emit && need_cur) || drain_beat);

  always_ff @(posedge clk) begin
    if (rst) begin
      a_busy_q  <= 1'b0;
      a_drain_q <= 1'b0;
      stat_bad_req <= '0;
    end else if (adv) begin
      if (take_bad) begin
        stat_bad_req <= stat_bad_req + 1'b1;
        a_drain_q <= j_len != 0;
      end else if (drain_beat && p_tlast) begin
        a_drain_q <= 1'b0;
      end
      if (emit) begin
        a_busy_q  <= !finish;
        a_hdr_q   <= c_hdr;  a_h_q <= c_h; a_e_q <= c_e; a_len_q <= c_len;
        a_npb_q   <= c_npb;  a_nb_q <= c_nb; a_k_q <= c_k + 1'b1;
        a_vlan_q  <= c_vlan; a_ipv6_q <= c_ipv6;
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
  function automatic logic [3:0][HB-1:0][1:0] mask_templates();
    logic [3:0][HB-1:0][1:0] t;
    int l3, l4;
    t = '0;
    for (int v = 0; v < 4; v++) begin
      l3 = v[1] ? 18 : 14;
      l4 = l3 + (v[0] ? 40 : 20);
      for (int p = 0; p < HB; p++) begin
        if (p < l3) t[v][p] = 2'd1;
        else if (!v[0] && (p == l3 + 1 || p == l3 + 8 || p == l3 + 10 || p == l3 + 11)) t[v][p] = 2'd2;
        else if (v[0] && p == l3) t[v][p] = 2'd3;
        else if (v[0] && (p == l3 + 1 || p == l3 + 2 || p == l3 + 3 || p == l3 + 7)) t[v][p] = 2'd2;
        else if (p == l4 + 6 || p == l4 + 7 || p == l4 + 12) t[v][p] = 2'd2;
      end
    end
    return t;
  endfunction
  localparam logic [3:0][HB-1:0][1:0] TPL = mask_templates();
  localparam logic [31:0] FIRST_C14 = hm_crc_zpow(HM_ICRC_SEED, KW - 14);
  localparam logic [31:0] FIRST_C18 = hm_crc_zpow(HM_ICRC_SEED, KW - 18);
  localparam logic [31:0][31:0] ZW = hm_crc_zpow_matrix(KW);

  function automatic logic [NCORR*4-1:0][31:0][31:0] corr_matrices();
    logic [NCORR*4-1:0][31:0][31:0] m;
    for (int s = 0; s < NCORR; s++)
      for (int v = 0; v < 4; v++)
        m[s*4 + v] = hm_crc_zpow_inv_matrix(v << (2 * s));
    return m;
  endfunction
  localparam logic [NCORR*4-1:0][31:0][31:0] CORR = corr_matrices();

  // Sideband carried with each beat through the back end.
  typedef struct packed {
    logic          valid;
    logic          last;
    logic          err;
    logic [KB:0]   nbytes;
    logic [15:0]   icrc_rel;  // ICRC position minus beat base (may be negative/large)
    logic          icrc_here; // beat holds at least one ICRC byte
  } side_t;

  // C1 inputs from the assembler
  side_t              a_side;
  logic [KW-1:0][7:0] a_masked;
  logic               a_first, a_active, a_crclast;
  logic [KB-1:0]      a_kz;
  always_comb begin
    logic [15:0] base, pic, rel, fl;
    base = c_k << KB;
    pic  = c_e - 16'd4;                    // ICRC position
    rel  = pic - base;
    fl   = (c_e < 16'd60) ? 16'd60 : c_e;  // frame length
    a_side.valid     = emit;
    a_side.last      = finish;
    a_side.err       = c_err | a_err_now;
    a_side.nbytes    = finish ? (KB+1)'(fl - base) : (KB+1)'(KW);
    a_side.icrc_rel  = rel;
    a_side.icrc_here = (pic < base + 16'(KW)) && (pic + 16'd4 > base);
    a_first   = c_k == 0;
    a_active  = base < pic;
    a_crclast = (base < pic) && (pic <= base + 16'(KW));
    a_kz      = KB'(base + 16'(KW) - pic);
    for (int l = 0; l < KW; l++) begin
      logic [1:0] code;
      code = 2'd0;
      for (int h = 0; h < HBEATS; h++)
        if (c_k == 16'(h)) code = TPL[{c_vlan, c_ipv6}][h*KW + l];
      if (base + 16'(l) >= pic) code = 2'd1;
      case (code)
        2'd0: a_masked[l] = a_beat[l];
        2'd1: a_masked[l] = 8'h00;
        2'd2: a_masked[l] = 8'hFF;
        default: a_masked[l] = a_beat[l] | 8'h0F;
      endcase
    end
  end

  // C1
  side_t              c1_side;
  logic [KW-1:0][7:0] c1_data, c1_masked;
  logic               c1_first, c1_active, c1_crclast, c1_vlan;
  logic [KB-1:0]      c1_kz;
  always_ff @(posedge clk) begin
    if (adv) begin
      c1_data <= a_beat; c1_masked <= a_masked;
      c1_first <= a_first; c1_active <= a_active; c1_crclast <= a_crclast; c1_kz <= a_kz;
      c1_vlan <= c_vlan;
    end
    if (rst) c1_side <= '0;
    else if (adv) c1_side <= a_side;
  end

  // C2
  localparam int PARTS = KW / 16;
  logic [PARTS-1:0][31:0] c2_part;
  hm_crc32_fold #(.DATA_BYTES(KW), .PARTS(PARTS)) u_fold (
    .clk, .en(adv), .data(c1_masked), .part_q(c2_part)
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
    if (adv) begin
      cs_data[0] <= c2_data; cs_x[0] <= crc_new; cs_kz[0] <= c2_kz;
      cs_cl[0] <= c2_side.valid && c2_crclast;
      for (int s = 0; s < NCORR; s++) begin
        logic [1:0] bits;
        bits = 2'({26'h0, cs_kz[s]} >> (2 * s));
        cs_data[s+1] <= cs_data[s];
        cs_x[s+1]    <= hm_crc_matvec(CORR[s*4 + int'(bits)], cs_x[s]);
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

  // ICRC insertion
  logic [31:0]        icrc_now, icrc_hold_q;
  logic [KW-1:0][7:0] ins_data;
  side_t              fin;
  always_comb begin
    fin      = cs_side[NCORR];
    icrc_now = cs_cl[NCORR] ? ~cs_x[NCORR] : icrc_hold_q;
    ins_data = cs_data[NCORR];
    for (int l = 0; l < KW; l++) begin
      logic [15:0] d;
      d = 16'(l) - fin.icrc_rel;
      if (fin.icrc_here && d < 16'd4) ins_data[l] = icrc_now[8*d[1:0] +: 8];
    end
  end
  always_ff @(posedge clk) if (adv && cs_cl[NCORR]) icrc_hold_q <= ~cs_x[NCORR];

  // Output skid
  localparam int OW = DW + KW + 2;
  logic [OW-1:0] o_pack, m_pack;
  logic [KW-1:0] o_keep;
  always_comb begin
    for (int l = 0; l < KW; l++) o_keep[l] = (KB+1)'(l) < fin.nbytes;
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

  /* verilator lint_off UNUSEDSIGNAL */
  logic unused_ok;
  assign unused_ok = ^{h2, h2_op, f2_unused, rot2[2*DW-1:DW]};
  /* verilator lint_on UNUSEDSIGNAL */

  initial begin
    if (DATA_WIDTH < 256) $error("hm_tx_path: DATA_WIDTH must be at least 256");
    if (KW * 8 != DATA_WIDTH) $error("hm_tx_path: KEEP_WIDTH must be DATA_WIDTH/8");
  end

endmodule
