// RoCEv2 receive packet path.
//
// Ethernet frames (no FCS) arrive on s_axis from the MAC. Each frame is stored whole in a data
// FIFO while it is parsed and its ICRC checked (store and forward), then either dropped (and
// counted by reason) or delivered as a header record on m_hdr plus its payload, realigned to
// lane 0, on m_axis. Every frame, accepted or dropped, is also reported on the monitor port
// (mon_valid/mon_data, no back-pressure) with its decoded fields, verdict and ICRC verdict.
//
// Frame layout parsed (offsets from the frame start; ROCEV2.md sections 1-5):
//   0  Eth dst(6) src(6) [0x8100 PCP/DEI/VID] EtherType(2)       l3 = 14 or 18
//   l3 IPv4 (20, IHL 5, proto 17) | IPv6 (40, next header 17)    l4 = l3 + 20 or 40
//   l4 UDP sport(2) dport(2)=4791 len(2) csum(2)
//   l4+8  BTH opcode, SE/M/PadCnt/TVer, P_Key, FECN/BECN/Resv6, DestQP, AckReq/Resv7, PSN
//   l4+20 extension headers by opcode (DETH, RETH|AtomicETH, AETH, AtomicAckETH, ImmDt|IETH)
//   payload, pad (PadCnt), ICRC (4, LSB first); E = end of the IP datagram; Ethernet padding
//   may follow E only in frames of 64 bytes or less.
//
// The ICRC is checked by residue: the CRC register, seeded so that the Ethernet header counts
// as absent, runs over the masked bytes l3..E including the ICRC and must end at 0xDEBB20E3.
// Bytes past E in the last beat are absorbed as zeros; the comparison constant accounts for
// them (Z^k * 0xDEBB20E3 for k trailing zero bytes), so no per-byte-count CRC trees are needed.
//
// Pipeline (free running, one beat per cycle, at most ~8 LUT levels per stage):
//   S0  input register, data FIFO write
//   SA  frame geometry of the beat (E relative to the beat, header beat select)
//   S1  ICRC masking, header snapshot, frame length
//   S2  CRC partial sums; L3/L4 views; IPv4 checksum compressed to two operands
//   S3  CRC register; field decode and the individual checks; checksum add and first fold
//   S4  residue compare; reasons before/after the ICRC in priority order; checksum verdict
//   S5  verdict: counters, monitor, status FIFO write (with the realignment plan)
// then the output stage drops or delivers each stored frame.
//
// s_axis: tkeep must be contiguous from lane 0 and all ones except on the last beat.
module hm_rx_path
  import hm_pkg::*;
  import hm_crc_pkg::*;
#(
  // AXI4-Stream data width in bits (256 or 512; at least 256 so that the L2/L3 lengths
  // needed by the ICRC masks arrive in the first beat).
  parameter int DATA_WIDTH = 512,
  // Largest frame accepted (bytes, without FCS); longer frames are dropped as `length`.
  parameter int MAX_FRAME_BYTES = 9216,
  // Data FIFO depth in beats (power of two, holds at least one maximum frame).
  parameter int DATA_FIFO_DEPTH = 1 << $clog2((MAX_FRAME_BYTES + DATA_WIDTH / 8 - 1) / (DATA_WIDTH / 8) + 32),
  // Frame status FIFO depth (power of two).
  parameter int REC_FIFO_DEPTH = 32,
  // Header record output FIFO depth (power of two).
  parameter int HDR_FIFO_DEPTH = 16,
  // The port's P_Key (its P_Key table's one entry): packets of another partition, or with
  // both keys limited members, are dropped as `bad_pkey`.
  parameter logic [15:0] PORT_PKEY = 16'hFFFF,
  // Bytes per beat (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  input  logic                  rst,

  // Frames from the MAC
  input  logic [DATA_WIDTH-1:0] s_axis_tdata,
  input  logic [KEEP_WIDTH-1:0] s_axis_tkeep,
  input  logic                  s_axis_tvalid,
  output logic                  s_axis_tready,
  input  logic                  s_axis_tlast,
  input  logic                  s_axis_tuser,   // on the last beat: the MAC saw a bad frame (FCS)

  // Header records of accepted frames
  output hm_roce_hdr_t          m_hdr_data,
  output logic                  m_hdr_valid,
  input  logic                  m_hdr_ready,

  // Payload of accepted frames (frames with payload_len 0 have none)
  output logic [DATA_WIDTH-1:0] m_axis_tdata,
  output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
  output logic                  m_axis_tvalid,
  input  logic                  m_axis_tready,
  output logic                  m_axis_tlast,

  // Monitor: one status per frame, in arrival order
  output hm_rx_status_t         mon_data,
  output logic                  mon_valid,

  // Counters, indexed by reason code (0 = accepted frames)
  output logic [HM_RSN_COUNT-1:0][31:0] stat_cnt
);

  localparam int KW       = KEEP_WIDTH;
  localparam int DW       = DATA_WIDTH;
  localparam int KB       = $clog2(KW);              // bits of a lane index
  localparam int HBEATS   = (128 + KW - 1) / KW;     // beats captured for header parsing
  localparam int HB       = HBEATS * KW;             // bytes captured
  localparam int MAXBEATS = (MAX_FRAME_BYTES + KW - 1) / KW;
  localparam int L3V      = HB - 18;                 // bytes of the L3 view
  localparam int L4V      = 48;                      // UDP(8) + BTH(12) + ext(28)

  // ----------------------------------------------------------------------------------------
  // Constants for the ICRC residue check
  // ----------------------------------------------------------------------------------------
  // Register after a first beat whose bytes before l3 are zero: Z^(KW-l3) * SEED.
  localparam logic [31:0] FIRST_C14 = hm_crc_zpow(HM_ICRC_SEED, KW - 14);
  localparam logic [31:0] FIRST_C18 = hm_crc_zpow(HM_ICRC_SEED, KW - 18);
  localparam logic [31:0][31:0] ZW = hm_crc_zpow_matrix(KW);

  function automatic logic [KW-1:0][31:0] expect_table();
    logic [KW-1:0][31:0] t;
    for (int k = 0; k < KW; k++) t[k] = hm_crc_zpow(HM_ICRC_SEED, k);
    return t;
  endfunction
  localparam logic [KW-1:0][31:0] EXPECT = expect_table();

  // ICRC mask templates (hm_crc_pkg) over the first HB (= 128) bytes.
  // Lanes [0, n) of a beat (n >= KW: all), as data bits: a word-level mask, which a
  // simulator evaluates as a shift instead of a loop over the lanes.
  function automatic logic [DW-1:0] bytes_below(input logic [KB:0] n);
    return int'(n) >= KW ? '1 : ~({DW{1'b1}} << (8 * int'(n)));
  endfunction
  function automatic logic [KW-1:0] lanes_below(input logic [KB:0] n);
    return int'(n) >= KW ? '1 : ~({KW{1'b1}} << n);
  endfunction

  localparam logic [3:0][8*HM_TPL_BYTES-1:0] TKEEP = hm_icrc_byte_masks(1'b0);
  localparam logic [3:0][8*HM_TPL_BYTES-1:0] TSET  = hm_icrc_byte_masks(1'b1);
  if (HB != HM_TPL_BYTES) begin : g_bad_tpl
    $error("hm_rx_path: the header window must be {HM_TPL_BYTES} bytes (DATA_WIDTH 256..1024)");
  end

  function automatic logic [KB:0] keep_bytes(input logic [KW-1:0] keep);
    return (KB+1)'(hm_keep_bytes(128'(keep)));
  endfunction

  // ----------------------------------------------------------------------------------------
  // S0: input register, data FIFO write
  // ----------------------------------------------------------------------------------------
  logic                s0_valid, s0_last, s0_user;
  logic [KW-1:0][7:0]  s0_data;
  logic [KB:0]         s0_nbytes;
  logic                rdy_q;

  assign s_axis_tready = rdy_q;

  always_ff @(posedge clk) begin
    // a beat's fields load only with the beat (they are used only with s0_valid)
    if (s_axis_tvalid && rdy_q) begin
      s0_data   <= s_axis_tdata;
      s0_last   <= s_axis_tlast;
      s0_user   <= s_axis_tlast && s_axis_tuser;
      s0_nbytes <= s_axis_tlast ? keep_bytes(s_axis_tkeep) : (KB+1)'(KW);
    end
    if (rst) s0_valid <= 1'b0;
    else     s0_valid <= s_axis_tvalid && rdy_q;
  end

  logic                sa_valid, sa_last, sa_first, sa_vlan, sa_ipv6, sa_user;
  logic [KW-1:0][7:0]  sa_data;
  logic [HBEATS-1:0]   sa_hsel;
  logic [17:0]         sa_rel;
  logic [15:0]         sa_lenb, sa_nbeats;
  logic [KB:0]         sa_nbytes;

  // Frame state, advanced per beat. rel = E - (byte offset of the beat), clamped at 0.
  logic                fs_first_q, fs_vlan_q, fs_ipv6_q, fs_store_q;
  logic [HBEATS-1:0]   fs_hsel_q;
  logic [15:0]         fs_len_q;
  logic [15:0]         fs_cnt_q;    // beats stored for this frame so far
  logic                b0_vlan, b0_ipv6, cur_vlan, cur_ipv6;
  logic [17:0]         b0_e, cur_rel;

  always_comb begin
    logic [17:0] e4, e4v, e6, e6v;
    logic        v6_plain, v6_vlan;
    b0_vlan  = {s0_data[12], s0_data[13]} == 16'h8100;
    v6_plain = {s0_data[12], s0_data[13]} == 16'h86DD;
    v6_vlan  = {s0_data[16], s0_data[17]} == 16'h86DD;
    b0_ipv6  = b0_vlan ? v6_vlan : v6_plain;
    e4  = 18'd14 + {2'b0, s0_data[16], s0_data[17]};
    e4v = 18'd18 + {2'b0, s0_data[20], s0_data[21]};
    e6  = 18'd54 + {2'b0, s0_data[18], s0_data[19]};
    e6v = 18'd58 + {2'b0, s0_data[22], s0_data[23]};
    case ({b0_vlan, b0_ipv6})
      2'b00: b0_e = e4;
      2'b10: b0_e = e4v;
      2'b01: b0_e = e6;
      default: b0_e = e6v;
    endcase
    cur_vlan = fs_first_q ? b0_vlan : fs_vlan_q;
    cur_ipv6 = fs_first_q ? b0_ipv6 : fs_ipv6_q;
    cur_rel  = fs_first_q ? b0_e : ((sa_rel > 18'(KW)) ? sa_rel - 18'(KW) : 18'd0);
  end

  always_ff @(posedge clk) begin
    if (!rst && s0_valid) begin
      fs_vlan_q <= cur_vlan;
      fs_ipv6_q <= cur_ipv6;
    end
    if (rst || (s0_valid && s0_last)) begin
      // the next beat starts a frame
      fs_first_q <= 1'b1;
      fs_hsel_q  <= HBEATS'(1);
      fs_len_q   <= '0;
      fs_cnt_q   <= '0;
      fs_store_q <= 1'b1;
    end else if (s0_valid) begin
      fs_first_q <= 1'b0;
      fs_hsel_q  <= fs_hsel_q << 1;
      fs_len_q   <= (fs_len_q > 16'(65535 - KW)) ? 16'hFFFF : fs_len_q + 16'(KW);
      if (fs_store_q) fs_cnt_q <= fs_cnt_q + 1'b1;
      fs_store_q <= fs_store_q && (fs_cnt_q + 1'b1 < 16'(MAXBEATS));
    end
  end

  // Data FIFO: raw beats, at most MAXBEATS per frame.
  logic                  df_s_ready, df_m_valid, df_m_ready;
  logic [DW-1:0]         df_m_data;
  logic [$clog2(DATA_FIFO_DEPTH+1):0] df_level;

  hm_fifo #(.WIDTH(DW), .DEPTH(DATA_FIFO_DEPTH)) u_data_fifo (
    .clk, .rst,
    .s_data(s0_data), .s_valid(s0_valid && fs_store_q), .s_ready(df_s_ready),
    .m_data(df_m_data), .m_valid(df_m_valid), .m_ready(df_m_ready),
    .level(df_level)
  );

  // ----------------------------------------------------------------------------------------
  // SA: per-beat geometry
  // ----------------------------------------------------------------------------------------

  always_ff @(posedge clk) begin
    if (s0_valid) sa_rel <= cur_rel;   // held between beats: the next beat's rel derives from it
    if (s0_valid) sa_data <= s0_data;  // used only with sa_valid
    sa_last   <= s0_last;
    sa_user   <= s0_user;
    sa_first  <= fs_first_q;
    sa_vlan   <= cur_vlan;
    sa_ipv6   <= cur_ipv6;
    sa_hsel   <= fs_hsel_q;
    sa_lenb   <= fs_len_q;
    sa_nbytes <= s0_nbytes;
    sa_nbeats <= fs_store_q ? fs_cnt_q + 1'b1 : fs_cnt_q;
    if (rst) sa_valid <= 1'b0;
    else     sa_valid <= s0_valid;
  end

  // ----------------------------------------------------------------------------------------
  // S1: CRC masking, header snapshot
  // ----------------------------------------------------------------------------------------
  logic                s1_valid, s1_last, s1_first, s1_active, s1_crclast, s1_vlan, s1_user;
  logic [KB-1:0]       s1_k;
  logic [KW-1:0][7:0]  s1_crc_data;
  logic [HB-1:0][7:0]  hacc_q, s1_hdr;
  logic [15:0]         s1_flen, s1_nbeats;

  logic                rel_big;   // rel > KW: the whole beat is before E
  assign rel_big = sa_rel > 18'(KW);

  // The masked beat and the header snapshot are computed inside the registers' enable: only
  // for a beat that moves.
  always_ff @(posedge clk) begin
    if (sa_valid) begin
      logic [DW-1:0]      keep, set;
      logic [HB-1:0][7:0] snap;
      // header beats masked by their template; lanes at or after E zero
      keep = '1;
      set  = '0;
      for (int h = 0; h < HBEATS; h++)
        if (sa_hsel[h]) begin
          keep = TKEEP[{sa_vlan, sa_ipv6}][h*DW +: DW];
          set  = TSET[{sa_vlan, sa_ipv6}][h*DW +: DW];
        end
      s1_crc_data <= ((sa_data & keep) | set) & (rel_big ? '1 : bytes_below(sa_rel[KB:0]));
      // Header snapshot: bytes past the end of the frame read as zero (a new frame starts
      // from zeros, lanes past tkeep are cleared).
      snap = sa_first ? '0 : hacc_q;
      for (int h = 0; h < HBEATS; h++)
        if (sa_hsel[h]) snap[h*KW +: KW] = sa_data & bytes_below(sa_nbytes);
      if (|sa_hsel) hacc_q <= snap;
      s1_hdr <= snap;
    end
    s1_first    <= sa_first;
    s1_vlan     <= sa_vlan;
    s1_active   <= sa_rel != 0;
    s1_crclast  <= sa_rel != 0 && !rel_big;
    s1_k        <= KB'(18'(KW) - sa_rel);
    s1_last     <= sa_last;
    s1_user     <= sa_user;
    s1_flen     <= (sa_lenb > 16'(65535 - KW)) ? 16'hFFFF : sa_lenb + 16'(sa_nbytes);
    s1_nbeats   <= sa_nbeats;
    if (rst) s1_valid <= 1'b0;
    else     s1_valid <= sa_valid;
  end

  // ----------------------------------------------------------------------------------------
  // S2: CRC partial sums; L3/L4 views; IPv4 checksum compressed
  // ----------------------------------------------------------------------------------------
  localparam int PARTS = KW / 16;
  logic [PARTS-1:0][31:0] s2_part;

  hm_crc32_fold #(.DATA_BYTES(KW), .PARTS(PARTS)) u_fold (
    .clk, .en(s1_valid), .data(s1_crc_data), .part_q(s2_part)
  );

  logic                s2_valid, s2_last, s2_first, s2_active, s2_crclast, s2_vlan_crc, s2_user;
  logic [KB-1:0]       s2_k;
  logic                s2_vlan, s2_isv4, s2_isv6;
  logic [47:0]         s2_eth_dst, s2_eth_src;
  logic [15:0]         s2_tci;
  logic [L3V-1:0][7:0] s2_l3;
  logic [L4V-1:0][7:0] s2_l4;
  logic [1:0][39:0]    s2_cs;      // per l3 offset (14, 18): two checksum operands
  logic [15:0]         s2_flen, s2_nbeats;
  logic [17:0]         s2_e;

  // The L3/L4 views and checksum operands are computed inside the registers' enable: only
  // for a beat that moves (a simulator skips them while the path is idle; synthesis is the
  // same registers with a clock enable).
  always_ff @(posedge clk) begin
    s2_last     <= s1_last;
    s2_user     <= s1_user;
    s2_first    <= s1_first;
    s2_active   <= s1_active;
    s2_crclast  <= s1_crclast;
    s2_vlan_crc <= s1_vlan;
    s2_k        <= s1_k;
    if (s1_valid) begin
      logic        vlan, v6;
      logic [15:0] et;
      logic [L3V-1:0][7:0] l3;
      logic [L4V-1:0][7:0] l4;
      logic [1:0][39:0]    cs2;   // per l3 offset (14, 18): two checksum operands
      vlan = {s1_hdr[12], s1_hdr[13]} == 16'h8100;
      et   = vlan ? {s1_hdr[16], s1_hdr[17]} : {s1_hdr[12], s1_hdr[13]};
      v6   = et == 16'h86DD;
      for (int i = 0; i < L3V; i++) l3[i] = vlan ? s1_hdr[18 + i] : s1_hdr[14 + i];
      for (int i = 0; i < L4V; i++) l4[i] = v6 ? l3[40 + i] : l3[20 + i];
      // Checksum operands for both possible l3 offsets, straight from the snapshot.
      for (int v = 0; v < 2; v++) begin
        logic [9:0][19:0] w;
        logic [39:0] a, b, c, d, e;
        for (int i = 0; i < 10; i++) w[i] = {4'h0, s1_hdr[14 + 4*v + 2*i], s1_hdr[15 + 4*v + 2*i]};
        a = hm_csa20(w[0], w[1], w[2]);
        b = hm_csa20(w[3], w[4], w[5]);
        c = hm_csa20(w[6], w[7], w[8]);
        d = hm_csa20(a[39:20], a[19:0], b[39:20]);
        e = hm_csa20(b[19:0], c[39:20], c[19:0]);
        a = hm_csa20(d[39:20], d[19:0], e[39:20]);
        b = hm_csa20(a[39:20], a[19:0], e[19:0]);
        c = hm_csa20(b[39:20], b[19:0], w[9]);
        cs2[v] = c;
      end
      s2_vlan    <= vlan;
      s2_isv4    <= et == 16'h0800;
      s2_isv6    <= v6;
      s2_eth_dst <= {s1_hdr[0], s1_hdr[1], s1_hdr[2], s1_hdr[3], s1_hdr[4], s1_hdr[5]};
      s2_eth_src <= {s1_hdr[6], s1_hdr[7], s1_hdr[8], s1_hdr[9], s1_hdr[10], s1_hdr[11]};
      s2_tci     <= {s1_hdr[14], s1_hdr[15]};
      s2_l3      <= l3;
      s2_l4      <= l4;
      s2_cs      <= cs2;
      s2_flen    <= s1_flen;
      s2_nbeats  <= s1_nbeats;
    end
    if (rst) s2_valid <= 1'b0;
    else     s2_valid <= s1_valid;
  end

  // E from the (registered) views: the L3 offset plus the IP length.
  always_comb begin
    if (s2_isv6) s2_e = (s2_vlan ? 18'd58 : 18'd54) + {2'b0, s2_l3[4], s2_l3[5]};
    else         s2_e = (s2_vlan ? 18'd18 : 18'd14) + {2'b0, s2_l3[2], s2_l3[3]};
  end

  // ----------------------------------------------------------------------------------------
  // S3: CRC register; decode; individual checks
  // ----------------------------------------------------------------------------------------
  logic [31:0] crc_q, crc_new;
  always_comb begin
    logic [31:0] fold;
    fold = '0;
    for (int p = 0; p < PARTS; p++) fold = fold ^ s2_part[p];
    if (s2_first) crc_new = (s2_vlan_crc ? FIRST_C18 : FIRST_C14) ^ fold;
    else          crc_new = hm_crc_matvec(ZW, crc_q) ^ fold;
  end
  always_ff @(posedge clk) if (s2_valid && s2_active) crc_q <= crc_new;

  hm_roce_hdr_t  d_hdr;
  hm_op_info_t   op_i;
  // individual check results, in priority order (see DropReason)
  logic t1, n2, t3, n4, o5, r6, t7, r7, tv, uo;
  logic pnl, bpk;   // PadCnt on a FIRST / MIDDLE packet; P_Key mismatch (checked after S4)
  logic [6:0] need;
  logic [19:0] csum_sum;

  always_comb begin
    logic [7:0]  l3off, iphdr;
    logic [15:0] udp_len, udp_dport, flen;
    logic [3:0]  ver, ihl;
    logic [7:0]  proto, tc;
    logic [1:0]  pad;
    logic        mf;
    logic [12:0] fragoff;
    logic [27:0][7:0] ext;
    logic [39:0] cs;

    flen    = s2_flen;
    l3off   = s2_vlan ? 8'd18 : 8'd14;
    iphdr   = s2_isv6 ? 8'd40 : 8'd20;
    ver     = s2_l3[0][7:4];
    ihl     = s2_l3[0][3:0];
    mf      = s2_l3[6][5];
    fragoff = {s2_l3[6][4:0], s2_l3[7]};
    proto   = s2_isv6 ? s2_l3[6] : s2_l3[9];
    tc      = s2_isv6 ? {s2_l3[0][3:0], s2_l3[1][7:4]} : s2_l3[1];
    udp_dport = {s2_l4[2], s2_l4[3]};
    udp_len   = {s2_l4[4], s2_l4[5]};
    pad       = s2_l4[9][5:4];
    for (int i = 0; i < 28; i++) ext[i] = s2_l4[20 + i];
    op_i = hm_op_info(s2_l4[8]);
    need = 7'd12 + 7'(op_i.hdr_len) + 7'(pad);
    // FIRST / MIDDLE of SEND, WRITE (RC and UC) and READ response (RC): no pad allowed
    pnl = pad != 2'b00 && (s2_l4[8][7:6] == 2'b00) &&
          (s2_l4[8][4:0] == 5'h00 || s2_l4[8][4:0] == 5'h01 || s2_l4[8][4:0] == 5'h06 ||
           s2_l4[8][4:0] == 5'h07 || (!s2_l4[8][5] && (s2_l4[8][4:0] == 5'h0D || s2_l4[8][4:0] == 5'h0E)));
    bpk = {s2_l4[10][6:0], s2_l4[11]} != PORT_PKEY[14:0] || !(s2_l4[10][7] || PORT_PKEY[15]);

    // checksum operands: final add for the offset in use
    cs = s2_vlan ? s2_cs[1] : s2_cs[0];
    csum_sum = cs[39:20] + cs[19:0];


    t1  = flen < 16'd14 || (s2_vlan && flen < 16'd18);
    n2  = !(s2_isv4 || s2_isv6);
    t3  = flen < 16'(l3off) + 16'(iphdr);
    n4  = ver != (s2_isv6 ? 4'd6 : 4'd4);
    o5  = s2_isv4 && (ihl != 4'd5 || mf || fragoff != '0);
    r6  = proto != 8'd17;
    t7  = flen < 16'(l3off) + 16'(iphdr) + 16'd8;
    r7  = udp_dport != HM_ROCE_UDP_PORT;
    tv  = s2_l4[9][3:0] != 4'd0;
    uo  = !op_i.known;

    // Record
    d_hdr = '0;
    d_hdr.eth_dst    = s2_eth_dst;
    d_hdr.eth_src    = s2_eth_src;
    d_hdr.vlan_valid = s2_vlan;
    if (s2_vlan) begin
      d_hdr.vlan_pcp = s2_tci[15:13];
      d_hdr.vlan_dei = s2_tci[12];
      d_hdr.vlan_vid = s2_tci[11:0];
    end
    d_hdr.ipv6 = s2_isv6;
    if (s2_isv6) begin
      for (int i = 0; i < 16; i++) begin
        d_hdr.ip_src[8*(15-i) +: 8] = s2_l3[8 + i];
        d_hdr.ip_dst[8*(15-i) +: 8] = s2_l3[24 + i];
      end
      d_hdr.flow_label = {s2_l3[1][3:0], s2_l3[2], s2_l3[3]};
      d_hdr.ttl        = s2_l3[7];
    end else begin
      d_hdr.ip_src[31:0] = {s2_l3[12], s2_l3[13], s2_l3[14], s2_l3[15]};
      d_hdr.ip_dst[31:0] = {s2_l3[16], s2_l3[17], s2_l3[18], s2_l3[19]};
      d_hdr.ttl          = s2_l3[8];
      d_hdr.ip_id        = {s2_l3[4], s2_l3[5]};
      d_hdr.ip_df        = s2_l3[6][6];
    end
    d_hdr.dscp      = tc[7:2];
    d_hdr.ecn       = tc[1:0];
    d_hdr.udp_sport = {s2_l4[0], s2_l4[1]};
    d_hdr.udp_dport = udp_dport;
    d_hdr.udp_len   = udp_len;
    d_hdr.udp_csum  = {s2_l4[6], s2_l4[7]};
    d_hdr.opcode    = s2_l4[8];
    d_hdr.se        = s2_l4[9][7];
    d_hdr.migreq    = s2_l4[9][6];
    d_hdr.padcnt    = pad;
    d_hdr.tver      = s2_l4[9][3:0];
    d_hdr.pkey      = {s2_l4[10], s2_l4[11]};
    d_hdr.fecn      = s2_l4[12][7];
    d_hdr.becn      = s2_l4[12][6];
    d_hdr.resv6     = s2_l4[12][5:0];
    d_hdr.dest_qp   = {s2_l4[13], s2_l4[14], s2_l4[15]};
    d_hdr.ackreq    = s2_l4[16][7];
    d_hdr.resv7     = s2_l4[16][6:0];
    d_hdr.psn       = {s2_l4[17], s2_l4[18], s2_l4[19]};
    if (op_i.reth || op_i.atomic_eth) begin
      d_hdr.va   = {ext[0], ext[1], ext[2], ext[3], ext[4], ext[5], ext[6], ext[7]};
      d_hdr.rkey = {ext[8], ext[9], ext[10], ext[11]};
    end
    if (op_i.reth) d_hdr.dma_len = {ext[12], ext[13], ext[14], ext[15]};
    if (op_i.atomic_eth) begin
      d_hdr.swap_add = {ext[12], ext[13], ext[14], ext[15], ext[16], ext[17], ext[18], ext[19]};
      d_hdr.compare  = {ext[20], ext[21], ext[22], ext[23], ext[24], ext[25], ext[26], ext[27]};
    end
    if (op_i.aeth) begin
      d_hdr.syndrome = ext[0];
      d_hdr.msn      = {ext[1], ext[2], ext[3]};
    end
    if (op_i.atomic_ack)
      d_hdr.atomic_orig = {ext[4], ext[5], ext[6], ext[7], ext[8], ext[9], ext[10], ext[11]};
    if (op_i.deth) begin
      d_hdr.qkey   = {ext[0], ext[1], ext[2], ext[3]};
      d_hdr.src_qp = {ext[5], ext[6], ext[7]};
    end
    if (op_i.ieth) d_hdr.imm = {ext[0], ext[1], ext[2], ext[3]};
    if (op_i.imm) begin
      case (op_i.imm_off)
        5'd8:    d_hdr.imm = {ext[8], ext[9], ext[10], ext[11]};
        5'd16:   d_hdr.imm = {ext[16], ext[17], ext[18], ext[19]};
        default: d_hdr.imm = {ext[0], ext[1], ext[2], ext[3]};
      endcase
    end
    d_hdr.payload_off = 16'(l3off) + 16'(iphdr) + 16'd8 + 16'(op_i.hdr_len);
    d_hdr.payload_len = '0;   // S4: udp_len - need
  end

  logic          s3_valid, s3_last, s3_crclast, s3_isv4, s3_l3ok, s3_user;
  logic [KB-1:0] s3_k;
  hm_roce_hdr_t  s3_hdr;
  logic [9:0]    s3_chk;      // {t1,n2,t3,n4,o5,r6,t7,r7,tv,uo}
  logic [17:0]   s3_e, s3_mine;
  logic [15:0]   s3_totlen, s3_plen;
  logic [6:0]    s3_need, s3_nopay_len;
  logic          s3_isv6, s3_nopay, s3_pnl, s3_bpk;
  logic [19:0]   s3_csum;
  logic [15:0]   s3_flen, s3_nbeats;

  always_ff @(posedge clk) begin
    s3_hdr     <= d_hdr;
    s3_chk     <= {t1, n2, t3, n4, o5, r6, t7, r7, tv, uo};
    s3_e       <= s2_e;
    s3_mine    <= (s2_vlan ? 18'd18 : 18'd14) + (s2_isv6 ? 18'd40 : 18'd20) + 18'd24;
    s3_totlen  <= {s2_l3[2], s2_l3[3]};
    s3_plen    <= {s2_l3[4], s2_l3[5]};
    s3_need    <= need;
    s3_nopay   <= op_i.no_payload;
    s3_pnl     <= pnl;
    s3_bpk     <= bpk;
    s3_nopay_len <= 7'd12 + 7'(op_i.hdr_len);
    s3_isv6    <= s2_isv6;
    s3_csum    <= csum_sum;
    s3_isv4    <= s2_isv4;
    s3_l3ok    <= s2_flen >= (s2_vlan ? 16'd38 : 16'd34);
    s3_crclast <= s2_crclast;
    s3_k       <= s2_k;
    s3_last    <= s2_last;
    s3_user    <= s2_user;
    s3_flen    <= s2_flen;
    s3_nbeats  <= s2_nbeats;
    if (rst) s3_valid <= 1'b0;
    else     s3_valid <= s2_valid;
  end

  // ----------------------------------------------------------------------------------------
  // S4: residue compare; reason priority; checksum verdict
  // ----------------------------------------------------------------------------------------
  logic        sticky_q, match_now;
  logic [3:0]  early_rsn;
  logic        csum_ok, t8, l9, l14, icrc_comp;
  logic [9:0]  f2;
  logic [15:0] s3_udp;
  always_comb begin
    logic c_t1, c_n2, c_t3, c_n4, c_o5, c_r6, c_t7, c_r7;
    {c_t1, c_n2, c_t3, c_n4, c_o5, c_r6, c_t7, c_r7} = s3_chk[9:2];
    s3_udp = s3_hdr.udp_len;
    match_now = s3_crclast && (crc_q == EXPECT[s3_k]);
    // The one's-complement sum of the ten header words is 0xFFFF exactly when their plain
    // sum S (< 10 * 0xFFFF + 1) is a nonzero multiple of 0xFFFF.
    for (int m = 1; m <= 10; m++) f2[m-1] = s3_csum == 20'(m * 65535);
    csum_ok = s3_isv4 && s3_l3ok && |f2;
    if      (c_t1) early_rsn = HM_RSN_TRUNCATED;
    else if (c_n2) early_rsn = HM_RSN_NOT_IP;
    else if (c_t3) early_rsn = HM_RSN_TRUNCATED;
    else if (c_n4) early_rsn = HM_RSN_NOT_IP;
    else if (c_o5) early_rsn = HM_RSN_IPV4_OPT_FRAG;
    else if (c_r6) early_rsn = HM_RSN_NOT_ROCE;
    else if (c_t7) early_rsn = HM_RSN_TRUNCATED;
    else if (c_r7) early_rsn = HM_RSN_NOT_ROCE;
    else           early_rsn = HM_RSN_ACCEPT;
    t8  = s3_e > {2'b0, s3_flen};
    l9  = (s3_isv4 && s3_totlen != s3_udp + 16'd20) || (s3_isv6 && s3_plen != s3_udp) ||
          s3_udp < 16'd24 || ({2'b0, s3_flen} > s3_e && s3_flen > 16'd64) ||
          s3_flen > 16'(MAX_FRAME_BYTES);
    l14 = s3_udp < 16'(s3_need) || (s3_nopay && s3_udp != 16'(s3_nopay_len));
    icrc_comp = !c_n2 && s3_e >= s3_mine && s3_e <= {2'b0, s3_flen};
  end

  always_ff @(posedge clk) begin
    if (rst) sticky_q <= 1'b0;
    else if (s3_valid) sticky_q <= s3_last ? 1'b0 : (sticky_q | match_now);
  end

  logic          s4_valid;
  hm_roce_hdr_t  s4_hdr;
  logic [3:0]    s4_early;
  logic          s4_t8, s4_l9, s4_l14, s4_tv, s4_uo, s4_isv4, s4_user;
  logic [3:0]    s4_late;   // checks 15-18, in priority order, resolved a stage early
  logic          s4_icrc_ok, s4_csum_ok;
  logic [15:0]   s4_flen, s4_nbeats;
  always_ff @(posedge clk) begin
    s4_hdr     <= s3_hdr;
    s4_hdr.payload_len <= s3_udp - 16'(s3_need);
    s4_early   <= early_rsn;
    s4_t8      <= t8;
    s4_user    <= s3_user;
    s4_l9      <= l9;
    s4_l14     <= l14;
    if (s3_udp[1:0] != 2'b00)                                   s4_late <= HM_RSN_MISALIGNED;
    else if (s3_pnl)                                            s4_late <= HM_RSN_PAD_NOT_LAST;
    else if (17'(s3_udp) > 17'(s3_need) + 17'(HM_MAX_PAYLOAD))  s4_late <= HM_RSN_TOO_LONG;
    else if (s3_bpk)                                            s4_late <= HM_RSN_BAD_PKEY;
    else                                                        s4_late <= HM_RSN_ACCEPT;
    s4_tv      <= s3_chk[1];
    s4_uo      <= s3_chk[0];
    s4_isv4    <= s3_isv4;
    s4_icrc_ok <= icrc_comp && (sticky_q || match_now);
    s4_csum_ok <= csum_ok;
    s4_flen    <= s3_flen;
    s4_nbeats  <= s3_nbeats;
    if (rst) s4_valid <= 1'b0;
    else     s4_valid <= s3_valid && s3_last;
  end

  // ----------------------------------------------------------------------------------------
  // S5: verdict (first failing check in priority order), counters, monitor
  // ----------------------------------------------------------------------------------------
  hm_rx_status_t st, s5_st;
  logic          s5_valid;
  logic [15:0]   s5_nbeats;
  always_comb begin
    logic [3:0] pre, post;
    if (s4_user)                   pre = HM_RSN_MAC_ERROR;
    else if (s4_early != HM_RSN_ACCEPT) pre = s4_early;
    else if (s4_t8)                pre = HM_RSN_TRUNCATED;
    else if (s4_l9)                pre = HM_RSN_LENGTH;
    else                           pre = HM_RSN_ACCEPT;
    if (s4_isv4 && !s4_csum_ok)    post = HM_RSN_BAD_IPV4_CSUM;
    else if (s4_tv)                post = HM_RSN_TVER;
    else if (s4_uo)                post = HM_RSN_UNKNOWN_OPCODE;
    else if (s4_l14)               post = HM_RSN_LENGTH;
    else                           post = s4_late;
    st.hdr          = s4_hdr;
    st.icrc_ok      = s4_icrc_ok;
    st.ipv4_csum_ok = s4_csum_ok;
    st.frame_len    = s4_flen;
    if (pre != HM_RSN_ACCEPT) st.reason = pre;
    else if (!s4_icrc_ok)     st.reason = HM_RSN_BAD_ICRC;
    else                      st.reason = post;
  end

  always_ff @(posedge clk) begin
    s5_st     <= st;
    s5_nbeats <= s4_nbeats;
    if (rst) s5_valid <= 1'b0;
    else     s5_valid <= s4_valid;
  end

  assign mon_data  = s5_st;
  assign mon_valid = s5_valid;

  always_ff @(posedge clk) begin
    if (rst) stat_cnt <= '0;
    else for (int r = 0; r < HM_RSN_COUNT; r++)
      if (s5_valid && s5_st.reason == 4'(r)) stat_cnt[r] <= stat_cnt[r] + 1'b1;
  end

  // Realignment plan of the frame for the output stage (all in beats of the frame):
  //   hb    beat of the first payload byte, s its lane
  //   pbl   beat of the last payload byte
  //   tail  (s > 0) the last output beat lies wholly in beat pbl and is emitted on its own
  //   lastn bytes in the last output beat
  typedef struct packed {
    logic          drop;
    logic          empty;    // no payload
    logic [8:0]    nbeats;
    logic [8:0]    hb;
    logic [8:0]    pbl;
    logic [KB-1:0] s;
    logic          tail;
    logic [KB:0]   lastn;
    // position flags of the frame's first beat (i = 0)
    logic          at_hb, at_pbl, ilast;
  } plan_t;

  plan_t pl;
  always_comb begin
    logic [15:0] off, len, endb, jm1;
    off  = s5_st.hdr.payload_off;
    len  = s5_st.hdr.payload_len;
    endb = off + len - 16'd1;
    jm1  = (len - 16'd1) >> KB;                 // output beats - 1
    pl.drop   = s5_st.reason != HM_RSN_ACCEPT;
    pl.empty  = len == 16'd0;
    pl.nbeats = 9'(s5_nbeats);
    pl.hb     = 9'(off >> KB);
    pl.pbl    = 9'(endb >> KB);
    pl.s      = off[KB-1:0];
    pl.tail   = off[KB-1:0] != '0 && (jm1 == (endb >> KB) - (off >> KB));
    pl.lastn  = (len[KB-1:0] == '0) ? (KB+1)'(KW) : (KB+1)'(len[KB-1:0]);
    pl.at_hb  = (off >> KB) == 16'd0;
    pl.at_pbl = (endb >> KB) == 16'd0;
    pl.ilast  = s5_nbeats == 16'd1;
  end

  localparam int RECW = $bits(hm_roce_hdr_t) + $bits(plan_t);
  logic                  rf_m_valid, rf_m_ready, rf_s_ready;
  logic [RECW-1:0]       rf_m_data;
  logic [$clog2(REC_FIFO_DEPTH+1):0] rf_level;

  hm_fifo #(.WIDTH(RECW), .DEPTH(REC_FIFO_DEPTH)) u_rec_fifo (
    .clk, .rst,
    .s_data({s5_st.hdr, pl}), .s_valid(s5_valid), .s_ready(rf_s_ready),
    .m_data(rf_m_data), .m_valid(rf_m_valid), .m_ready(rf_m_ready),
    .level(rf_level)
  );

  // Input flow control: room for the beats and frames still in flight.
  always_ff @(posedge clk) begin
    if (rst) rdy_q <= 1'b0;
    else rdy_q <= (df_level < ($clog2(DATA_FIFO_DEPTH+1)+1)'(DATA_FIFO_DEPTH - 8)) &&
                  (rf_level < ($clog2(REC_FIFO_DEPTH+1)+1)'(REC_FIFO_DEPTH - 12));
  end

  // ----------------------------------------------------------------------------------------
  // Output stage: drop or deliver each stored frame, realigning the payload to lane 0.
  // Input beat i of a frame (s > 0) emits output beat i-hb-1 from its predecessor's upper
  // lanes and its own lower lanes when hb < i <= pbl, plus the tail at i == pbl; with s == 0
  // beat i emits output beat i-hb. A tail that coincides with another emission waits in
  // `pend` for the next cycle, which is always free (the next frame's first beat emits only
  // if that frame is single-beat-aligned, and then `pend` shifts along).
  // ----------------------------------------------------------------------------------------
  hm_roce_hdr_t  rf_hdr;
  plan_t         rf_pl;
  assign {rf_hdr, rf_pl} = rf_m_data;

  logic           busy_q;
  plan_t          pl_q;
  logic [8:0]     i_q;
  // flags of the next beat: i == hb, i > hb, i <= pbl, i == pbl, last beat
  logic           f_at_hb_q, f_past_hb_q, f_le_pbl_q, f_at_pbl_q, f_ilast_q;
  logic [KW-1:0][7:0] held_q;
  logic           pend_q;
  logic [KW-1:0][7:0] pend_data_q;
  logic [KB:0]    pend_n_q;

  plan_t          c;
  logic [8:0]     ci;
  logic           hq_s_ready, hq_push;
  logic           have, proc, ilast;
  logic [1:0]     ecnt;
  logic [KW-1:0][7:0] e1_data, rot;
  logic [2*DW-1:0]    rot2;
  logic [KB:0]    e1_n, e2_n;
  logic           e1_last;
  logic           out_ready;
  logic           o_valid, o_last;
  logic [KW-1:0][7:0] o_data;
  logic [KB:0]    o_n;

  always_comb begin
    logic pay, at_hb, past_hb, at_pbl, le_pbl;
    c  = busy_q ? pl_q : rf_pl;
    ci = busy_q ? i_q : 9'd0;
    have  = busy_q || (rf_m_valid && (rf_pl.drop || hq_s_ready));
    ilast = busy_q ? f_ilast_q : rf_pl.ilast;

    // rot: beat rotated down by s bytes (lane l = beat byte (l + s) mod KW). (Computing it
    // only with df_m_valid would spare a simulator the shift while idle, but costs about
    // 1,000 LUTs of gating in synthesis: not done.)
    rot2 = {df_m_data, df_m_data} >> (8 * c.s);
    rot  = rot2[DW-1:0];

    pay     = !c.drop && !c.empty;
    at_hb   = busy_q ? f_at_hb_q   : rf_pl.at_hb;
    past_hb = busy_q ? f_past_hb_q : 1'b0;
    at_pbl  = busy_q ? f_at_pbl_q  : rf_pl.at_pbl;
    le_pbl  = busy_q ? f_le_pbl_q  : 1'b1;
    ecnt = 2'd0; e1_data = rot; e1_n = (KB+1)'(KW); e1_last = 1'b0; e2_n = c.lastn;
    if (pay) begin
      if (c.s == '0) begin
        if ((at_hb || past_hb) && le_pbl) begin
          ecnt = 2'd1;
          e1_last = at_pbl;
          if (at_pbl) e1_n = c.lastn;
        end
      end else if (at_hb) begin
        if (at_pbl) begin   // the whole payload sits in this beat (a tail of its own)
          ecnt = 2'd1; e1_last = 1'b1; e1_n = c.lastn;
        end
      end else if (past_hb && le_pbl) begin
        ecnt = 2'd1;
        e1_data = (held_q & bytes_below((KB+1)'(KW - int'(c.s)))) | (rot & ~bytes_below((KB+1)'(KW - int'(c.s))));
        if (at_pbl) begin
          if (c.tail) ecnt = 2'd2;                    // plus the tail, from this beat alone
          else begin e1_last = 1'b1; e1_n = c.lastn; end
        end
      end
    end

    proc = have && df_m_valid && out_ready && !(pend_q && ecnt == 2'd2);

    o_valid = 1'b0; o_data = e1_data; o_n = e1_n; o_last = e1_last;
    if (out_ready) begin
      if (pend_q) begin
        o_valid = 1'b1; o_data = pend_data_q; o_n = pend_n_q; o_last = 1'b1;
      end else if (proc && ecnt != 0) begin
        o_valid = 1'b1;
      end
    end
  end

  assign df_m_ready = proc;
  assign rf_m_ready = proc && !busy_q;
  assign hq_push    = proc && !busy_q && !rf_pl.drop;

  always_ff @(posedge clk) begin
    if (rst) begin
      busy_q <= 1'b0;
      pend_q <= 1'b0;
    end else begin
      if (proc) begin
        busy_q <= !ilast;
        pl_q   <= c;
        i_q    <= ci + 9'd1;
        f_at_hb_q   <= ci + 9'd1 == c.hb;
        f_past_hb_q <= ci >= c.hb;
        f_le_pbl_q  <= ci < c.pbl;
        f_at_pbl_q  <= ci + 9'd1 == c.pbl;
        f_ilast_q   <= ci + 9'd2 == c.nbeats;
        held_q <= rot;
      end
      if (out_ready) begin
        if (pend_q) begin
          pend_q      <= proc && ecnt != 0;
          pend_data_q <= e1_data;
          pend_n_q    <= e1_n;
        end else if (proc && ecnt == 2'd2) begin
          pend_q      <= 1'b1;
          pend_data_q <= rot;
          pend_n_q    <= e2_n;
        end
      end
    end
  end

  // Output register + skid for m_axis
  localparam int OW = DW + KW + 1;
  logic [OW-1:0] o_pack, m_pack;
  logic [KW-1:0] o_keep;
  logic [DW-1:0] o_masked;
  always_comb begin
    o_keep   = lanes_below(o_n);
    o_masked = o_data & bytes_below(o_n);
    o_pack = {o_masked, o_keep, o_last};
  end

  hm_skid #(.WIDTH(OW)) u_out_skid (
    .clk, .rst,
    .s_data(o_pack), .s_valid(o_valid), .s_ready(out_ready),
    .m_data(m_pack), .m_valid(m_axis_tvalid), .m_ready(m_axis_tready)
  );
  assign {m_axis_tdata, m_axis_tkeep, m_axis_tlast} = m_pack;

  // Header records of accepted frames
  logic [$clog2(HDR_FIFO_DEPTH+1):0] hq_level;
  hm_fifo #(.WIDTH($bits(hm_roce_hdr_t)), .DEPTH(HDR_FIFO_DEPTH)) u_hdr_fifo (
    .clk, .rst,
    .s_data(rf_hdr), .s_valid(hq_push), .s_ready(hq_s_ready),
    .m_data(m_hdr_data), .m_valid(m_hdr_valid), .m_ready(m_hdr_ready),
    .level(hq_level)
  );

  // Intentionally unused: FIFO ready/level outputs covered by the input flow control, the
  // opcode-table bits the RX does not need, the checksum fold's carry-out.
  logic unused_ok;
  assign unused_ok = ^{df_s_ready, rf_s_ready, hq_level, op_i, rot2[2*DW-1:DW], csum_sum[19:16], s5_nbeats[15:9]};

  // Elaboration-time parameter checks
  if (DATA_WIDTH < 256 || DATA_WIDTH % 8 != 0) begin : g_bad_width
    $error("hm_rx_path: DATA_WIDTH must be a multiple of 8 and at least 256");
  end
  if (DATA_FIFO_DEPTH < MAXBEATS + 16) begin : g_bad_fifo
    $error("hm_rx_path: DATA_FIFO_DEPTH too small for MAX_FRAME_BYTES");
  end
  if (MAXBEATS > 511) begin : g_bad_max
    $error("hm_rx_path: MAX_FRAME_BYTES too large for the 9-bit beat counters");
  end

endmodule
