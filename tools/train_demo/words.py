"""Word lists of the synthetic text generators (tools/train_demo/data.py)."""

WORDS = """the of and to in is for on that with as by at from this be are or it an was not have has
which but will can all more one new other about also their time up after first people year two may
page total date name number amount invoice order price tax due paid item qty unit balance account
address city street phone email report table figure section chapter summary result results model data
value method system document text image line reading scan print office market river house water light
green blue red black white small large north south east west monday friday january march june october
december morning evening hello world quick brown fox jumps over lazy dog paper letter review note notes
customer service company limited receipt cash card change subtotal discount store open closed hours
doctor patient school student teacher class room floor level version release update build test check
""".split()

MORE_WORDS = """able above across act add age ago agree air allow almost alone along already always among animal
answer any appear apply area arm around art ask away back bad bag bank base bear beat become bed before begin
behind believe below best better between big bill bird blood board boat body book both box boy break bring
brother budget business buy call camera campaign capital car care carry case catch cause center central century
certain chair chance charge choice church citizen claim clear close coach cold college color come common
community computer condition consider contain control cost could country county course court cover create
crime cultural culture cup current cut dark daughter day dead deal death debate decade decide deep defense
degree design despite detail develop die difference difficult dinner direction director discover discuss
disease door down draw dream drive drop drug during early east easy eat economy edge education effect effort
eight either election else employee end energy enjoy enough enter entire environment especially establish even
evening event ever every evidence exactly example executive exist expect experience expert explain eye face
fact factor fail fall family far fast father fear federal feel feeling few field fight figure fill film final
finally financial find fine finger finish fire firm fish five floor fly focus follow food foot force foreign
forget form former forward four free friend front full fund future game garden gas general generation get girl
give glass goal good government great ground group grow growth guess gun guy hair half hand hang happen happy
hard head health hear heart heat heavy help her here herself high him himself his history hit hold home hope
hospital hot hotel hour however huge human hundred husband idea identify image imagine impact important
improve include including increase indeed indicate industry information inside instead institution interest
interview into investment issue itself job join just keep key kid kill kind kitchen know knowledge land
language last late later laugh law lawyer lay lead leader learn least leave left leg legal less let life like
likely list listen little live local long look lose loss lot love low machine magazine main maintain major
make man manage management manager many material matter maybe mean measure media medical meet meeting member
memory mention message middle might military million mind minute miss mission modern moment money month most
mother mouth move movement movie much music must myself nation national natural nature near nearly necessary
need network never news newspaper next nice night none nor nothing notice now occur off offer officer official
often oil old once only onto open operation opportunity option others our out outside over own owner page pain
painting parent part participant particular partner party pass past pattern pay peace per perform perhaps
period person personal phone physical pick picture piece place plan plant play player point police policy
political poor popular population position positive possible power practice prepare present president
pressure pretty prevent private probably problem process produce product production professional professor
program project property protect prove provide public pull purpose push put quality question quickly quite
race radio raise range rate rather reach read ready real reality realize really reason receive recent recently
recognize record reduce reflect region relate relationship religious remain remember remove represent require
research resource respond response rest return reveal rich right rise risk road rock role rule run safe same
save say scene science scientist score sea season seat second security see seek seem sell send senior sense
series serious serve set seven several shake share she shoot short shot should shoulder show side sign
significant similar simple simply since sing single sister sit site situation six size skill skin social
society soldier some somebody someone something sometimes son song soon sort sound source space speak special
specific speech spend sport spring staff stage stand standard star start state statement station stay step
still stock stop story strategy strong structure study stuff style subject success successful such suddenly
suffer suggest summer support sure surface table take talk task teach team technology television tell ten tend
term than thank then theory there these they thing think third those though thought thousand threat three
through throughout throw thus today together tonight too top toward town trade traditional training travel
treat treatment tree trial trip trouble true truth try turn type under understand unit until upon use usually
various very victim view violence visit voice vote wait walk wall want war watch way weapon wear week weight
well what whatever when where whether while who whole whom whose why wide wife win wind window wish within
without woman wonder word work worker would write writer wrong yard yeah yes yet you young your yourself
""".split()

MORE_NAMES = """Adams Baker Clark Davis Evans Fischer Garcia Harris Ito Jones Klein Lopez Martin Nguyen Olsen Patel
Quinn Rossi Schmidt Taylor Ueda Vogel Wagner Young Zhang Berlin Paris London Madrid Lisbon Oslo Vienna Boston
Denver Austin Lyon Nantes Turin Geneva Dublin Zurich""".split()
